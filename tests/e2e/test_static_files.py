"""Static files as a deployment serves them after `collectstatic`: fingerprinted, compressed, cached for a year.

gunicorn serves a STATIC_ROOT that `manage.py collectstatic` filled, as `make run` and the image do.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from tests.live_server import start_gunicorn
from tests.processes import ROOT, database_url

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]
YEAR = "max-age=315360000"


def fetch(url: str, **headers: str) -> tuple[dict[str, str], bytes]:
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=30) as response:
        return {k.lower(): v for k, v in response.headers.items()}, response.read()


def test_pages_link_hashed_files_that_are_served_gzipped_and_cached_for_a_year(require_postgres: None, tmp_path: Path) -> None:
    env = {**os.environ, "DATABASE_URL": database_url(), "MUSTER_DATA_DIR": str(tmp_path), "MUSTER_STATIC_ROOT": str(tmp_path / "static")}
    subprocess.run([sys.executable, "manage.py", "collectstatic", "--noinput", "-v", "0"], cwd=ROOT, env=env, check=True)
    manifest = json.loads((tmp_path / "static" / "staticfiles.json").read_text())["paths"]
    plotly = next(hashed for name, hashed in manifest.items() if name.startswith("vendor/plotly") and name.endswith(".min.js"))

    web, api = start_gunicorn(env, tmp_path / "web.log")
    try:
        _, page = fetch(api.base + "/accounts/login/")
        css = re.search(rb'href="(/static/frontend/muster\.[0-9a-f]{12}\.css)"', page)
        assert css, page[:800]

        headers, body = fetch(api.base + css.group(1).decode(), **{"Accept-Encoding": "gzip"})
        assert headers["content-encoding"] == "gzip"
        assert YEAR in headers["cache-control"] and "immutable" in headers["cache-control"]

        headers, body = fetch(f"{api.base}/static/{plotly}", **{"Accept-Encoding": "gzip"})
        assert headers["content-encoding"] == "gzip"
        assert YEAR in headers["cache-control"]
        assert len(body) < 2_000_000, "plotly.js is sent compressed (about a third of its 4.8 MB)"

        # The plain name still answers (a page cached before a deploy), but only for a short while.
        headers, _ = fetch(api.base + "/static/frontend/muster.css")
        assert YEAR not in headers["cache-control"]
    finally:
        web.terminate()
        web.wait(20)
