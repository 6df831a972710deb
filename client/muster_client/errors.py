"""What can go wrong talking to a Muster server, as exceptions a script can tell apart."""

from __future__ import annotations

from typing import Any


class MusterError(Exception):
    """Any failure of a request to Muster; `str()` is one line fit for a terminal."""


class Unreachable(MusterError):
    """No answer from the server: connection refused, unknown host, time-out. The message names the URL."""


class AuthError(MusterError):
    """The server does not accept the credentials: no token, an expired or revoked one (401), or not allowed (403)."""


class ApiError(MusterError):
    """The server refused the request (4xx) or failed it (5xx); `message` is its reason, field by field; `retry_after`
    the seconds a 429 said to wait (None if it said none)."""

    def __init__(self, status: int, message: str, body: Any = None, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.body = body
        self.retry_after = retry_after


def flatten_errors(body: Any, prefix: str = "") -> list[str]:
    """DRF's error bodies as lines: {"gpus_per_node": ["Too many."]} -> ["gpus_per_node: Too many."].

    Nested serializers and list items name their path (`simulate.exit_code`, `command.0`); `detail` and
    `non_field_errors` are the message itself.
    """
    if isinstance(body, dict):
        lines: list[str] = []
        for key, value in body.items():
            if key in ("detail", "non_field_errors"):
                lines += flatten_errors(value, prefix)
            else:
                lines += flatten_errors(value, f"{prefix}.{key}" if prefix else str(key))
        return lines
    if isinstance(body, list):
        if all(isinstance(item, str) for item in body):
            text = " ".join(body)
            return [f"{prefix}: {text}" if prefix else text] if text else []
        lines = []
        for index, item in enumerate(body):
            # A list of per-item errors has an empty dict for each item that was fine.
            lines += flatten_errors(item, f"{prefix}.{index}" if prefix else str(index)) if item else []
        return lines
    if body is None or body == "":
        return []
    return [f"{prefix}: {body}" if prefix else str(body)]


def error_message(status: int, body: Any, reason: str = "") -> str:
    """One line for an error response: the server's own words when it gave any, else its status."""
    lines = flatten_errors(body) if not isinstance(body, str) else [line for line in body.strip().splitlines()[:1] if line]
    # The server's sentences end in a full stop: "…per job.; nodes: …" would read twice stopped.
    text = "; ".join(line[:-1] if line.endswith(".") and i < len(lines) - 1 else line for i, line in enumerate(lines))
    if len(text) > 2000:
        text = text[:2000] + "..."
    return text or f"HTTP {status} {reason}".strip()
