"""`muster submit --test-only` (sbatch --test-only) against the server in this process: the estimate, exit codes, nothing queued."""

from __future__ import annotations

from typing import Any

import pytest
from muster_client import cli

from jobs.models import Job
from quotas.models import Quota
from tests.conftest import SimHarness
from tests.jobs.factories import JobFactory

IMAGE = "nvcr.io/nvidia/pytorch:24.05-py3"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = cli.main(list(argv))
    return code, capsys.readouterr().out


def test_test_only_says_when_it_would_start_and_queues_nothing(signed_in: Any, tx_sim: SimHarness, capsys: Any) -> None:
    flags = ["submit", "-N", "2", "-G", "8", "-t", "1h", "--image", IMAGE, "--test-only", "--", "python", "train.py"]
    code, out = run(capsys, *flags)
    assert code == 0
    assert out.startswith("It would start now (the next scheduling cycle places it).")
    assert "[ok] Fits this cluster." in out and out.endswith("Nothing was submitted.\n")

    JobFactory(owner=signed_in, nodes=16, queued=True, history=True, wall_time_seconds=7200)
    tx_sim.cycle()
    code, out = run(capsys, *flags)
    assert code == 0
    assert out.startswith("It would start about ") and "number 1 in the queue" in out
    assert Job.objects.count() == 1


def test_test_only_says_how_many_nodes_an_elastic_job_would_start_on(signed_in: Any, tx_sim: SimHarness, capsys: Any) -> None:
    JobFactory(owner=signed_in, nodes=13, queued=True, history=True, wall_time_seconds=7200)
    tx_sim.cycle()  # 13 of the 16 nodes taken
    code, out = run(capsys, "submit", "-N", "2-8", "-G", "8", "-t", "1h", "--image", IMAGE, "--test-only", "--", "python", "train.py")
    assert code == 0
    assert out.startswith("It would start now on 3 of 2-8 nodes (the next scheduling cycle places it).")


def test_a_range_beyond_the_cluster_is_taken_as_asked_and_every_answer_says_how_far_it_grows_for_now(
    signed_in: Any, tx_sim: SimHarness, capsys: Any
) -> None:
    """`-N 2-40` on 16 nodes was refused as if the job needed 40 nodes; sbatch takes it. It keeps 2-40 (it grows onto
    nodes added later), and each answer says it grows to the 16 there are for now."""
    cut = (
        "Asked for 2 to 40 nodes; the cluster has 16 nodes with at least 8 GPUs now, so it may grow to 16 for now, and "
        "further if nodes are added."
    )
    flags = ["submit", "-N", "2-40", "-G", "8", "-t", "1h", "--image", IMAGE, "--", "python", "train.py"]
    code, out = run(capsys, *flags[:-3], "--test-only", *flags[-3:])
    assert code == 0 and out.startswith("It would start now on 16 of 2-40 nodes") and f"[ok] Fits this cluster. {cut}" in out
    code, out = run(capsys, *flags[:-3], "--dry-run", *flags[-3:])
    assert code == 0 and f"{cut}\nIt fits the cluster and your limits" in out
    code, out = run(capsys, *flags)
    assert code == 0 and out.endswith(f": PENDING\n{cut}\n"), out
    assert list(Job.objects.values_list("min_nodes", "max_nodes", "nodes")) == [(2, 40, 40)]


def test_test_only_names_every_refusal_and_exits_5(signed_in: Any, capsys: Any) -> None:
    Quota.objects.create(user=signed_in, max_gpus=8, max_wall_time_seconds=3600)
    code, out = run(capsys, "submit", "-N", "2", "-G", "8", "-t", "2h", "--image", IMAGE, "--test-only", "--", "python", "train.py")
    assert code == 5
    assert out.startswith("It would be refused:")
    assert "nodes: The job needs 16 GPUs; your quota (user dana) allows at most 8 at once." in out
    assert "wall_time_seconds: The wall time is 7200 s (2 h)" in out
    # Each said once: a refused limit is one of the problems, not listed again as [NO]; the limits it meets still are.
    assert "[NO]" not in out and "GPUs: 16 at once" not in out
    assert out.count("16 GPUs") == 1 and "[ok] Fits this cluster." in out
    assert not Job.objects.exists()


def test_test_only_estimates_an_arrays_first_element(signed_in: Any, tx_sim: SimHarness, capsys: Any) -> None:
    """It refused --array ("--test-only estimates one job"), though sbatch --test-only --array answers for the first task."""
    flags = ["submit", "-N", "1", "-G", "1", "-t", "1h", "--image", IMAGE, "--array", "2-5", "--test-only", "--", "python", "train.py"]
    code, out = run(capsys, *flags)
    assert code == 0
    assert out.startswith("It would start now")
    assert "That is the array's first element (index 2) of 4; the others queue behind it." in out
    assert not Job.objects.exists()


def test_test_only_says_how_many_of_an_arrays_elements_the_budget_left_covers(signed_in: Any, tx_sim: SimHarness, capsys: Any) -> None:
    """`[ok] Budget: this job may use 1.0 node-hours` of a 100-element array, when what was left covered 17 of them."""
    Quota.objects.create(user=signed_in, node_hours_per_period=17)
    flags = ["submit", "-N", "1", "-G", "8", "-t", "1h", "--image", IMAGE, "--test-only", "--", "python", "train.py"]
    code, out = run(capsys, *flags[:-3], "--array", "0-99", *flags[-3:])
    assert code == 0
    assert (
        "  [waits] Budget: each of the array's 100 elements may use 1.0 node-hours (1 node x 1.00 h); your quota (user dana) "
        "has 17.0 node-hours left this period. That covers 17 of them; the other 83 would wait for the budget (BUDGET)."
    ) in out.splitlines()
    code, out = run(capsys, *flags[:-3], "--array", "0-9", *flags[-3:])
    assert "That covers all 10 of them." in out and "[ok] Budget: each of the array's 10 elements" in out
    code, out = run(capsys, *flags)  # one job: as before
    assert "[ok] Budget: this job may use 1.0 node-hours" in out and "covers" not in out
    assert not Job.objects.exists()
