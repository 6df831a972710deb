"""Production settings pass Django's deployment checks, the image never runs on the development key, and every page
sends a Content-Security-Policy that forbids inline script, with no page relying on one."""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import session_for

ROOT = Path(__file__).resolve().parents[2]


def manage(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("MUSTER_", "DJANGO_"))}
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env={**base, **env}, capture_output=True, text=True, timeout=120)


def test_production_settings_pass_check_deploy_with_no_warning(tmp_path: Path) -> None:
    run = manage(
        "check",
        "--deploy",
        "--fail-level",
        "WARNING",
        MUSTER_DEV="0",
        DJANGO_SECRET_KEY=secrets.token_urlsafe(50),
        MUSTER_DATA_DIR=str(tmp_path),
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "System check identified no issues (0 silenced)." in run.stdout


def test_development_settings_are_what_check_deploy_warns_about(tmp_path: Path) -> None:
    """The check above can fail: with the local defaults it reports the insecure settings."""
    run = manage("check", "--deploy", "--fail-level", "WARNING", MUSTER_DATA_DIR=str(tmp_path))
    assert run.returncode != 0
    for warning in ("security.W004", "security.W008", "security.W012", "security.W016"):
        assert warning in run.stderr + run.stdout


def test_production_refuses_to_start_without_a_secret_key(tmp_path: Path) -> None:
    run = manage("check", MUSTER_DEV="0", MUSTER_DATA_DIR=str(tmp_path))
    assert run.returncode != 0
    assert "DJANGO_SECRET_KEY must be set" in run.stderr


def test_the_image_and_manifests_default_to_production() -> None:
    dockerfile = (ROOT / "platform/Dockerfile").read_text()
    assert re.search(r"^ENV MUSTER_DEV=0\b", dockerfile, re.M), "the image must not default to the development key"
    assert "DJANGO_SECRET_KEY:?" in (ROOT / "docker-compose.yml").read_text()
    assert 'MUSTER_DEV: "0"' in (ROOT / "platform/kubernetes/muster.yaml").read_text()


INLINE_SCRIPT = re.compile(r"<script(?![^>]*\bsrc=)(?![^>]*type=\"application/json\")[^>]*>", re.I)
INLINE_HANDLER = re.compile(r"<[^>]+\son[a-z]+\s*=", re.I)


@pytest.mark.parametrize(
    "path",
    ["/", "/jobs/new/", "/jobs/{job}/", "/cluster/", "/dashboard/", "/usage/", "/quotas/", "/api/docs/", "/admin/", "/accounts/login/"],
)
def test_pages_send_a_strict_csp_and_use_no_inline_script(path: str, admin_user, submit, sim) -> None:
    job = submit()["id"]
    sim.cycle()
    client = session_for(admin_user)
    response = client.get(path.format(job=job))
    assert response.status_code == 200
    policy = response["Content-Security-Policy"]
    directives = dict(d.strip().split(" ", 1) for d in policy.split(";") if d.strip())
    assert directives["script-src"] == "'self'"
    assert directives["frame-ancestors"] == "'none'" and directives["object-src"] == "'none'"
    html = response.content.decode()
    assert not INLINE_SCRIPT.search(html), INLINE_SCRIPT.search(html)
    if not path.startswith("/admin/"):  # Django admin's own templates are Django's business
        assert not INLINE_HANDLER.search(html), INLINE_HANDLER.search(html)
