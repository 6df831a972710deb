"""`muster usage --all` (admins): every account's node-hours this period in one table, as Slurm's sreport cluster
AccountUtilizationByUser lists them, each row as that account's own `muster usage` states it; `--team` one team and its
members. Against the server in this process."""

from __future__ import annotations

import json
from typing import Any

import pytest
from muster_client import cli

from quotas.models import Quota
from tests.accounts.factories import UserFactory
from tests.jobs.factories import JobFactory
from tests.quotas.factories import TeamFactory, UsageChargeFactory

HEADERS = [
    "ACCOUNT",
    "GPUS",
    "NOW/MAX(+BORROWED)",
    "NODE-H",
    "USED",
    "NODE-H",
    "BUDGET",
    "LEFT",
    "COMMITTED",
    "GPU-H",
    "USED",
    "MAX",
    "WALL",
    "MAX",
    "NODE-H/JOB",
]


def rows(text: str) -> dict[str, str]:
    """The table's lines by account ('user dana', 'team vision')."""
    return {" ".join(line.split()[:2]): line for line in text.splitlines() if line.startswith(("user ", "team "))}


def test_an_admin_lists_every_accounts_usage_as_each_ones_own_usage_says_it(signed_in: Any, capsys: pytest.CaptureFixture[str]) -> None:
    vision = TeamFactory(name="vision")
    vision.members.add(signed_in)
    erin = UserFactory(username="erin")
    Quota.objects.create(user=signed_in, node_hours_per_period=30)
    Quota.objects.create(team=vision, node_hours_per_period=100)
    # Eight seconds of a whole node: early in the period, what the budget's figures look like.
    UsageChargeFactory(job=JobFactory(owner=signed_in, team=vision, finished=True), node_seconds=8.0)
    UsageChargeFactory(job=JobFactory(owner=erin, finished=True), node_seconds=5400.0)

    # Not an admin: refused, saying what they may read instead.
    assert cli.main(["usage", "--all"]) == 4
    assert capsys.readouterr().err.strip() == (
        "muster: error: not allowed: muster usage --all lists every account's usage, for admins only; yours and your teams': muster usage"
    )
    assert cli.main(["usage", "--team", "vision"]) == 2
    assert "--team picks the accounts of --all: muster usage --all --team vision" in capsys.readouterr().err

    assert cli.main(["usage"]) == 0
    own = rows(capsys.readouterr().out)
    signed_in.is_staff = True
    signed_in.save()
    assert cli.main(["usage", "--all"]) == 0
    text = capsys.readouterr().out
    lines = text.splitlines()
    assert lines[0].startswith("Budget period ") and lines[1].split() == HEADERS
    everyone = rows(text)
    assert list(everyone) == ["user dana", "user erin", "team vision"]
    # The same figures as the account's own `muster usage`: 0.0022 used of 30, 29.9978 left.
    assert everyone["user dana"] == own["user dana"] and everyone["team vision"] == own["team vision"]
    assert everyone["user dana"].split()[3:6] == ["0.0022", "30", "29.9978"]
    assert everyone["user erin"].split()[3] == "1.5"

    assert cli.main(["usage", "--all", "--team", "vision"]) == 0
    assert list(rows(capsys.readouterr().out)) == ["user dana", "team vision"]
    assert cli.main(["usage", "--all", "--team", "nosuch"]) == 5
    assert capsys.readouterr().err.strip() == "muster: error: team: Unknown team nosuch; the teams are vision."

    assert cli.main(["usage", "--all", "--team", "vision", "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert [a["name"] for a in found["users"]] == ["dana"] and [a["name"] for a in found["teams"]] == ["vision"]
    assert found["users"][0]["usage"]["node_hours_used"] == pytest.approx(8 / 3600)
