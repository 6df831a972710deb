"""The settings in force, as an admin reads them: `manage.py muster_settings` and the Settings page (/settings/)."""

from __future__ import annotations

import json
import re
from io import StringIO
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.core.management import call_command

from config.effective_settings import NOT_SETTINGS, variable_names
from tests.conftest import session_for
from tests.project.test_settings_docs import ROOT, settings_reads


def test_every_variable_muster_reads_is_shown() -> None:
    # A variable added to settings.py shows on the page and in the command without anyone remembering to add it.
    assert set(variable_names()) == set(settings_reads())


def test_the_scripts_own_variables_are_not_called_typos() -> None:
    # docs/settings.md's "Not settings": set in CI or by make run, they are not flagged as unknown.
    doc = (ROOT / "docs" / "settings.md").read_text()
    listed = set(re.findall(r"`(MUSTER_[A-Z0-9_]+)`", doc[doc.index("## Not settings") :]))
    assert listed == NOT_SETTINGS


def test_make_runs_own_variables_and_the_muster_commands_are_not_called_typos(admin_user: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # Every make run exports MUSTER_GUNICORN_READY_FILE and MUSTER_RUN_SIGINT_DEFAULT to its processes: the Settings
    # page said "Set in the environment but not read by Muster ... A misspelt name leaves its default in force" on a
    # fresh make run. An admin's shell with the muster command's MUSTER_URL and MUSTER_TOKEN is no typo either.
    run_local = (ROOT / "scripts" / "run-local.sh").read_text()
    cli = "".join(p.read_text() for p in (ROOT / "client" / "muster_client").glob("*.py"))
    read = {name for name in re.findall(r"\b(MUSTER_[A-Z0-9_]+[A-Z0-9])\b", run_local)}
    read |= set(re.findall(r"environ(?:\.get)?[\[(]\"(MUSTER_[A-Z0-9_]+)\"", cli))
    assert {"MUSTER_GUNICORN_READY_FILE", "MUSTER_RUN_SIGINT_DEFAULT", "MUSTER_STOP_SECONDS", "MUSTER_URL", "MUSTER_TOKEN"} <= read
    for name in read:
        monkeypatch.setenv(name, "1")
    html = session_for(admin_user).get("/settings/").content.decode()
    assert 'data-testid="settings-unknown"' not in html
    assert "Set but not read" not in _run()[1]


def _run(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("muster_settings", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_command_says_what_is_in_force_and_from_where(settings: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MUSTER_CYCLE_INTERVAL_SECONDS", "7")
    settings.MUSTER_CYCLE_INTERVAL_SECONDS = 7
    # A value settings.py caps reads as it is used, with what was set beside it.
    monkeypatch.setenv("MUSTER_TELEMETRY_PUSH_MAX_BYTES", "999999999")
    settings.MUSTER_TELEMETRY_PUSH_MAX_BYTES = 262144
    monkeypatch.delenv("MUSTER_BUDGET_PERIOD", raising=False)
    out, _ = _run()
    lines = {line.split()[0]: line for line in out.splitlines()[1:-1]}
    assert lines["MUSTER_CYCLE_INTERVAL_SECONDS"].split() == ["MUSTER_CYCLE_INTERVAL_SECONDS", "environment", "7"]
    assert lines["MUSTER_TELEMETRY_PUSH_MAX_BYTES"].split()[1:] == ["environment", "262144", "(set", "to", "999999999)"]
    assert lines["MUSTER_BUDGET_PERIOD"].split()[1:] == ["default", django_settings.MUSTER_BUDGET_PERIOD]
    # CI's own variables (MUSTER_REQUIRE_SERVICES, MUSTER_CHROMIUM) are the scripts', not typos.
    monkeypatch.setenv("MUSTER_REQUIRE_SERVICES", "1")
    assert "Set but not read" not in _run()[1]

    # A URL left empty (REDIS_URL: no Redis, the embedded defaults) reads "empty" as other empty values do, not blank.
    settings.REDIS_URL = ""
    monkeypatch.delenv("REDIS_URL", raising=False)
    out, _ = _run()
    assert {line.split()[0]: line for line in out.splitlines()[1:-1]}["REDIS_URL"].split() == ["REDIS_URL", "default", "empty"]

    changed, _ = _run("--changed")
    assert "MUSTER_CYCLE_INTERVAL_SECONDS" in changed and "MUSTER_BUDGET_PERIOD" not in changed


def test_command_names_a_misspelt_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    # MUSTER_DEFAULT_MAX_GPU (no S) sets nothing: every user keeps the unlimited default, unsaid until now.
    monkeypatch.setenv("MUSTER_DEFAULT_MAX_GPU", "8")
    _, err = _run()
    assert "Set but not read by Muster" in err and "MUSTER_DEFAULT_MAX_GPU" in err
    data = json.loads(_run("--json")[0])
    assert "MUSTER_DEFAULT_MAX_GPU" in data["unknown"]


def test_secrets_are_never_shown(settings: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    settings.SECRET_KEY = "s3cret-key-value-" * 4
    monkeypatch.setenv("DJANGO_SECRET_KEY", settings.SECRET_KEY)
    monkeypatch.setenv("REDIS_URL", "redis://:hunter2@redis.example:6379/0")
    settings.REDIS_URL = "redis://:hunter2@redis.example:6379/0"
    monkeypatch.setenv("MUSTER_LOGS_STORAGE_OPTIONS", '{"bucket_name": "logs", "secret_key": "AKIAxyz"}')
    options = {"bucket_name": "logs", "secret_key": "AKIAxyz"}
    settings.STORAGES = {**settings.STORAGES, "joblogs": {**settings.STORAGES["joblogs"], "OPTIONS": options}}
    out, _ = _run("--json")
    rows = {row["name"]: row for row in json.loads(out)["settings"]}
    assert rows["DJANGO_SECRET_KEY"]["value"] == rows["DJANGO_SECRET_KEY"]["environment"] == "(set)"
    assert rows["REDIS_URL"]["value"] == "redis://:***@redis.example:6379/0"
    assert '"bucket_name": "logs"' in rows["MUSTER_LOGS_STORAGE_OPTIONS"]["value"]
    assert "s3cret" not in out and "hunter2" not in out and "AKIAxyz" not in out


def test_admins_settings_page(admin_user: Any, user: Any, settings: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MUSTER_BUDGET_PERIOD", "week")
    settings.MUSTER_BUDGET_PERIOD = "week"
    monkeypatch.setenv("MUSTER_DEFAULT_MAX_GPU", "8")
    admin = session_for(admin_user)
    html = admin.get("/settings/").content.decode()
    assert 'data-testid="settings-link"' in admin.get("/quotas/").content.decode()
    row = html[html.index("<code>MUSTER_BUDGET_PERIOD</code>") :].split("</tr>")[0]
    assert "week" in row and "environment" in row
    assert "MUSTER_DEFAULT_MAX_GPU" in html[html.index('data-testid="settings-unknown"') :].split("</p>")[0]
    assert settings.SECRET_KEY not in html
    only = admin.get("/settings/?changed=1").content.decode()
    assert "<code>MUSTER_BUDGET_PERIOD</code>" in only and "<code>MUSTER_PREEMPTION_GRACE_SECONDS</code>" not in only

    # A researcher is refused it.
    assert session_for(user).get("/settings/").status_code == 403
