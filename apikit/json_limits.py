"""JSON bodies bounded in depth before they are parsed (config/middleware.py, telemetry pushes).

Python's json module recurses once per nesting level: a 2 KB body nested 1,000 deep raises
RecursionError (a 500) before any serializer sees it, and anyone can send one without logging
in. No Muster body nests more than a few levels, so anything deeper is refused as a 400 first.
"""

from __future__ import annotations

import re

MAX_JSON_DEPTH = 32
# JSON strings (with their escapes) are skipped: brackets inside them do not nest anything.
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKET = re.compile(rb"[\[\]{}]")


def json_depth_error(raw: bytes, limit: int = MAX_JSON_DEPTH) -> str | None:
    """A message if the JSON text nests deeper than `limit`, else None. Linear in the body's size."""
    depth = 0
    for bracket in _BRACKET.findall(_STRING.sub(b"", raw)):
        if bracket in (b"[", b"{"):
            depth += 1
            if depth > limit:
                return f"The JSON body nests deeper than {limit} levels."
        else:
            depth -= 1
    return None
