"""The repository layout rules DESIGN.md sets, checked from outside pytest's own imports."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_platform_is_not_a_python_package() -> None:
    # Inside pytest the stdlib `platform` is already imported, so only a fresh interpreter
    # started in the repo root can show a shadowing `platform/` package.
    result = subprocess.run(
        [sys.executable, "-c", "import platform, uuid; print(platform.python_version(), platform.__file__)"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert str(ROOT / "platform") not in result.stdout
    assert not list((ROOT / "platform").rglob("*.py")), "platform/ holds shell scripts and manifests only"


def test_required_top_level_entries_exist() -> None:
    for entry in ["manage.py", "platform", "jobs", "quotas", "telemetry", "frontend", "docker-compose.yml", "tests"]:
        assert (ROOT / entry).exists(), entry


def test_manage_py_check_passes() -> None:
    result = subprocess.run([sys.executable, "manage.py", "check", "--fail-level", "WARNING"], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_compose_stack_runs_every_part_from_the_environment() -> None:
    import yaml

    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    assert {"postgres", "redis", "web", "worker", "beat"} <= set(compose["services"])
    for name in ("web", "worker", "beat"):
        env = compose["services"][name]["environment"]
        assert env["DATABASE_URL"].startswith("postgres://") and env["REDIS_URL"].startswith("redis://")
        assert env["MUSTER_DEV"] == "0", "production refuses to start without DJANGO_SECRET_KEY"
    assert "manage.py migrate" in " ".join(compose["services"]["web"]["command"])
