"""Plotly's JavaScript, served from the installed plotly package: no CDN, so charts work offline.

A static-files finder exposes the package's `plotly.min.js` as `vendor/plotly-<version>/plotly.min.js`:
WhiteNoise serves it straight from the package in development and tests (WHITENOISE_USE_FINDERS),
and `collectstatic` copies it for production like any other static file. The version in the
path means an upgraded plotly is a new URL, never a stale cached script.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal, overload

import plotly
from django.contrib.staticfiles.finders import BaseFinder
from django.core.checks import CheckMessage, Error
from django.core.files.storage import FileSystemStorage

PLOTLY_DIR = Path(plotly.__file__).resolve().parent / "package_data"
PLOTLY_PREFIX = f"vendor/plotly-{plotly.__version__}"
PLOTLY_JS = f"{PLOTLY_PREFIX}/plotly.min.js"


class PlotlyFinder(BaseFinder):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.storage = FileSystemStorage(location=PLOTLY_DIR)
        # collectstatic and WhiteNoise put a storage's files under its `prefix`.
        self.storage.prefix = PLOTLY_PREFIX  # type: ignore[attr-defined]  # read by getattr; the stubs don't declare it

    def check(self, **kwargs: Any) -> list[CheckMessage]:
        if not (PLOTLY_DIR / "plotly.min.js").is_file():
            return [Error(f"plotly.min.js is missing from the plotly package ({PLOTLY_DIR}); job charts cannot load.", id="telemetry.E001")]
        return []

    @overload
    def find(self, path: str, find_all: Literal[False] = False, **kwargs: Any) -> str | None: ...
    @overload
    def find(self, path: str, find_all: Literal[True], **kwargs: Any) -> list[str]: ...
    def find(self, path: str, find_all: bool = False, **kwargs: Any) -> str | list[str] | None:
        find_all = find_all or bool(kwargs.get("all"))
        match = str(PLOTLY_DIR / "plotly.min.js") if path == PLOTLY_JS else None
        if find_all:
            return [match] if match else []
        return match

    def list(self, ignore_patterns: Any) -> Iterator[tuple[str, FileSystemStorage]]:
        yield "plotly.min.js", self.storage
