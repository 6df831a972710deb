"""`muster queue` as squeue, against the server in this process: pending jobs with their reason and expected start,
then the user's jobs on their nodes, and how many the cluster runs in all."""

from __future__ import annotations

import json
from typing import Any

import pytest
from muster_client import cli

from tests.conftest import SimHarness
from tests.jobs.factories import JobFactory


def rows(out: str) -> dict[str, list[str]]:
    return {line.split()[0]: line.split() for line in out.splitlines()[1:-1]}


def test_the_queue_shows_pending_then_running_jobs_with_their_nodes_and_time_left(
    signed_in: Any, tx_sim: SimHarness, django_user_model: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    other = django_user_model.objects.create_user(username="erin")
    mine = JobFactory(owner=signed_in, name="gang", nodes=2, gpus_per_node=8, wall_time_seconds=7200, queued=True, history=True)
    theirs = JobFactory(owner=other, name="theirs", nodes=1, gpus_per_node=8, queued=True, history=True)
    waits = JobFactory(owner=signed_in, name="waits", nodes=16, gpus_per_node=8, queued=True, history=True)
    tx_sim.cycle()
    tx_sim.advance(2)

    assert cli.main(["queue"]) == 0
    out = capsys.readouterr().out
    listed = rows(out)
    # The whole cluster's pending queue, its reason in squeue's parentheses...
    assert listed[str(waits.pk)][3:6] == ["PENDING", "16x8", "1"] and listed[str(waits.pk)][-1].startswith("(")
    # ...then the user's job on its nodes: running, placed seconds ago, about 2 hours left, its two nodes.
    gang = listed[str(mine.pk)]
    assert gang[3:5] == ["RUNNING", "2x8"] and gang[8] in ("2h", "1h59m") and gang[-1].startswith("sim-node-[")
    # Another's running job is not listed to them, but counted.
    assert str(theirs.pk) not in listed
    assert out.splitlines()[-1].endswith(
        "1 running, 0 starting (of 2 on the cluster: others' jobs are listed to their owners and admins only)"
    )

    assert cli.main(["queue", "-t", "R"]) == 0
    assert list(rows(capsys.readouterr().out)) == [str(mine.pk)]
    assert cli.main(["queue", "--start"]) == 0
    assert list(rows(capsys.readouterr().out)) == [str(waits.pk)]


def test_the_queue_names_running_array_elements_as_squeue_does(
    signed_in: Any, tx_sim: SimHarness, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["submit", "-G", "1", "-t", "1h", "--image", "busybox:1.36", "--array", "0-1", "--json", "--", "python", "x.py"]
    assert cli.main(argv) == 0
    array_id = json.loads(capsys.readouterr().out)["array_id"]
    # Pending, from the queue API's entries, as running, from the jobs'.
    assert cli.main(["queue", "-t", "PD"]) == 0
    assert sorted(row[1] for row in rows(capsys.readouterr().out).values()) == [f"{array_id}_0", f"{array_id}_1"]
    tx_sim.cycle()
    tx_sim.advance(2)

    assert cli.main(["queue", "-t", "R"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split()[:2] == ["ID", "ARRAY"]
    assert sorted(row[1] for row in rows(out).values()) == [f"{array_id}_0", f"{array_id}_1"]
    # -j as squeue's: the array's id names every element, 20_1 one of them; pending and running alike.
    submitted = cli.main(["submit", "-G", "8", "-N", "16", "-t", "1h", "--image", "busybox:1.36", "--array", "0-2", "--json", "--", "x"])
    assert submitted == 0
    waiting = json.loads(capsys.readouterr().out)["array_id"]
    tx_sim.cycle()
    assert cli.main(["queue", "-j", str(array_id)]) == 0
    assert sorted(row[1] for row in rows(capsys.readouterr().out).values()) == [f"{array_id}_0", f"{array_id}_1"]
    assert cli.main(["queue", "-j", f"{array_id}_1,{waiting}_2"]) == 0
    assert sorted(row[1] for row in rows(capsys.readouterr().out).values()) == [f"{array_id}_1", f"{waiting}_2"]


def test_jobs_sort_as_the_job_lists_columns_and_a_bad_key_is_said(
    signed_in: Any, tx_sim: SimHarness, capsys: pytest.CaptureFixture[str]
) -> None:
    small = JobFactory(owner=signed_in, name="small", nodes=1, gpus_per_node=1, queued=True, history=True)
    big = JobFactory(owner=signed_in, name="big", nodes=4, gpus_per_node=8, queued=True, history=True)
    mid = JobFactory(owner=signed_in, name="mid", nodes=1, gpus_per_node=8, queued=True, history=True)

    assert cli.main(["jobs", "--sort=-size", "--json"]) == 0
    assert [job["id"] for job in json.loads(capsys.readouterr().out)] == [big.pk, mid.pk, small.pk]
    assert cli.main(["jobs", "--sort", "size", "--limit", "1"]) == 0
    captured = capsys.readouterr()
    assert list(rows(captured.out + "\n")) == [str(small.pk)]
    assert "showing the first 1 by size; there are more" in captured.err

    assert cli.main(["jobs", "--sort", "wall_time"]) != 0
    assert "Cannot sort by wall_time; sort by id, name, owner, state, size, time, priority, submitted" in capsys.readouterr().err


def test_the_queue_says_when_jobs_cannot_start_on_the_cluster_as_its_estimates_are_then_stale(
    signed_in: Any, tx_sim: SimHarness, capsys: pytest.CaptureFixture[str]
) -> None:
    """While the jobs' namespace was gone, `muster queue` showed starts already past with nothing to say why."""
    from django.utils import timezone

    from jobs.models import ClusterHealth

    JobFactory(owner=signed_in, name="waits", nodes=1, gpus_per_node=8, queued=True, history=True)
    assert cli.main(["queue"]) == 0
    assert "cannot start" not in capsys.readouterr().err
    ClusterHealth.objects.update_or_create(
        pk=1, defaults={"reachable": False, "error": "the jobs' namespace muster-jobs is being deleted", "down_since": timezone.now()}
    )
    assert cli.main(["queue"]) == 0
    err = capsys.readouterr().err
    assert "muster: jobs cannot start on the cluster now (since " in err
    assert err.rstrip().endswith("the jobs' namespace muster-jobs is being deleted")
    assert cli.main(["queue", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["summary"]["cluster"]["usable"] is False
