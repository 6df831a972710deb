"""`muster why` of another user's pending job, against the server in this process: the queue lists it to everyone,
so `why` says what the queue shows of it (its place, reason and priority) and no more."""

from __future__ import annotations

import json
from typing import Any

import pytest
from muster_client import cli

from tests.conftest import SimHarness
from tests.jobs.factories import JobFactory


def test_why_of_another_users_queued_job_says_what_the_queue_shows(
    signed_in: Any, tx_sim: SimHarness, django_user_model: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    erin = django_user_model.objects.create_user(username="erin")
    runs = JobFactory(owner=erin, name="small", nodes=1, gpus_per_node=8, queued=True, history=True)
    tx_sim.cycle()
    waits = JobFactory(owner=erin, name="big", nodes=16, gpus_per_node=8, queued=True, history=True, env={"SECRET": "x"})
    tx_sim.cycle()

    assert cli.main(["queue"]) == 0
    assert [line.split()[:4] for line in capsys.readouterr().out.splitlines()[1:-1]] == [[str(waits.pk), "big", "erin", "PENDING"]]
    code = cli.main(["why", str(waits.pk)])
    out, err = capsys.readouterr()
    assert code == 0 and "muster: error" not in err  # (the server in this process may log its 404 on stderr)
    lines = out.splitlines()
    assert lines[0].startswith(f"Job {waits.pk} (big) is PENDING: ") and lines[0].endswith("]")
    assert "Position 1 in the queue." in lines
    assert any(line.startswith("Priority ") for line in lines)
    assert lines[-1] == f"Job {waits.pk} is erin's: this is what the queue shows of it; only its owner and admins see the rest."
    assert "SECRET" not in out

    assert cli.main(["why", str(waits.pk), "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert (answer["id"], answer["state"], answer["queue_position"]) == (waits.pk, "PENDING", 1)

    # Her running job is not in the queue it shows dana: still no job that dana may see.
    assert cli.main(["why", str(runs.pk)]) == 5
    assert f"muster: error: No job {runs.pk} (or none that you may see).\n" in capsys.readouterr().err
