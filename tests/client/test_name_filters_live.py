"""-n as Slurm's commands read it, against the server in this process: `muster queue -n NAME` is squeue's --name and
`muster jobs --name` sacct's (each name whole, comma-separated), `muster jobs -n` sacct's --noheader. -n was --limit
in both: the old form is refused in words that say what it is now, never an empty list."""

from __future__ import annotations

from typing import Any

import pytest

from tests.client.cli_run import run, run_live
from tests.conftest import SimHarness
from tests.jobs.factories import JobFactory


def ids(out: str, *, header: bool = True, footer: bool = True) -> list[int]:
    lines = out.splitlines()[1 if header else 0 : -1 if footer else None]
    return [int(line.split()[0]) for line in lines]


def test_queue_n_is_the_jobs_name_as_in_squeue(signed_in: Any, tx_sim: SimHarness, capsys: pytest.CaptureFixture[str]) -> None:
    sweep = JobFactory(owner=signed_in, name="sweep", nodes=1, gpus_per_node=8, queued=True, history=True)
    JobFactory(owner=signed_in, name="sweep-big", nodes=1, gpus_per_node=8, queued=True, history=True)
    evals = JobFactory(owner=signed_in, name="eval", nodes=1, gpus_per_node=8, queued=True, history=True)
    tx_sim.cycle()
    tx_sim.advance(2)
    waiting = JobFactory(owner=signed_in, name="sweep", nodes=16, gpus_per_node=8, queued=True, history=True)
    tx_sim.cycle()

    code, out, err = run_live(capsys, "queue", "-n", "sweep")
    assert (code, err) == (0, "")
    assert ids(out) == [waiting.pk, sweep.pk]  # pending first, then running; sweep-big is not named sweep
    code, out, _ = run_live(capsys, "queue", "--name", "sweep,eval", "-t", "R")
    assert code == 0 and ids(out) == [sweep.pk, evals.pk]
    code, out, _ = run_live(capsys, "queue", "-n", "sweep", "-n", "eval", "--limit", "2")
    assert code == 0 and ids(out) == [waiting.pk, sweep.pk]

    # The old -n N (the first N entries) is said, not answered with an empty queue.
    code, out, err = run_live(capsys, "queue", "-n", "3")
    assert code == 2 and out == ""
    assert err == "muster: error: no job in the queue is named 3: -n is a job's name, as squeue -n (the first 3 entries: --limit 3)\n"
    # A job that is named 3 is simply listed.
    three = JobFactory(owner=signed_in, name="3", nodes=16, gpus_per_node=8, queued=True, history=True)
    tx_sim.cycle()
    code, out, _ = run_live(capsys, "queue", "-n", "3")
    assert code == 0 and ids(out) == [three.pk]


def test_jobs_name_is_whole_names_and_n_is_noheader_as_in_sacct(
    signed_in: Any, tx_sim: SimHarness, capsys: pytest.CaptureFixture[str]
) -> None:
    sweep = JobFactory(owner=signed_in, name="sweep", nodes=1, gpus_per_node=8)
    big = JobFactory(owner=signed_in, name="sweep-big", nodes=1, gpus_per_node=8)
    evals = JobFactory(owner=signed_in, name="eval", nodes=1, gpus_per_node=8)

    code, out, _ = run_live(capsys, "jobs", "--name", "sweep")
    assert code == 0 and ids(out, footer=False) == [sweep.pk]
    code, out, _ = run_live(capsys, "jobs", "--name", "sweep,eval")
    assert code == 0 and ids(out, footer=False) == [evals.pk, sweep.pk]  # newest first
    code, out, _ = run_live(capsys, "jobs", "--name", "sweep-big", "--name", "eval", "--limit", "1")
    assert code == 0 and ids(out, footer=False) == [evals.pk]

    # -n: the rows alone, for a script; no job is no line at all.
    code, out, _ = run_live(capsys, "jobs", "-n")
    assert code == 0 and ids(out, header=False, footer=False) == [evals.pk, big.pk, sweep.pk]
    assert not out.startswith("ID")
    code, out, _ = run_live(capsys, "jobs", "-n", "--name", "nosuch")
    assert (code, out) == (0, "")

    # The old -n N (at most N jobs) says what it is now.
    code, out, err = run(capsys, "jobs", "-n", "10")  # argparse's error: `muster jobs: error: ...`
    assert code == 2 and out == ""
    assert "unrecognized arguments: 10 (-n is --noheader, as sacct's: at most 10 jobs is --limit 10)" in err
    code, out, err = run(capsys, "jobs", "-n", "1")
    assert code == 2 and "(-n is --noheader, as sacct's: at most 1 job is --limit 1)" in err


def test_jobs_limit_past_any_list_lists_them_all(signed_in: Any, capsys: pytest.CaptureFixture[str]) -> None:
    # A limit larger than a list can hold ended in a ValueError traceback from islice.
    jobs = [JobFactory(owner=signed_in, name="sweep", nodes=1, gpus_per_node=8) for _ in range(2)]
    code, out, err = run_live(capsys, "jobs", "--limit", "99999999999999999999", "-n")
    assert (code, err) == (0, "")
    assert ids(out, header=False, footer=False) == [jobs[1].pk, jobs[0].pk]


def test_a_name_with_a_comma_is_found_by_its_whole_name_as_well_as_each_name_of_the_list(
    signed_in: Any, tx_sim: SimHarness, capsys: pytest.CaptureFixture[str]
) -> None:
    """sbatch -J 'lr=0.1,bs=32' is taken, but squeue -n splits at the comma: such a job could never be listed by its
    name. The whole text is one more name, so `-n 'lr=0.1,bs=32'` finds it, and the jobs named lr=0.1 or bs=32."""
    both = JobFactory(owner=signed_in, name="lr=0.1,bs=32", nodes=16, gpus_per_node=8, queued=True, history=True)
    lr = JobFactory(owner=signed_in, name="lr=0.1", nodes=16, gpus_per_node=8, queued=True, history=True)
    JobFactory(owner=signed_in, name="lr=0.2,bs=32", nodes=16, gpus_per_node=8, queued=True, history=True)
    tx_sim.cycle()
    code, out, err = run_live(capsys, "queue", "-n", "lr=0.1,bs=32")
    assert (code, err) == (0, "")
    assert sorted(ids(out)) == [both.pk, lr.pk]
    code, out, _ = run_live(capsys, "jobs", "--name", "lr=0.1,bs=32")
    assert code == 0 and ids(out, footer=False) == [lr.pk, both.pk]
    code, out, _ = run_live(capsys, "queue", "-n", "lr=0.1")
    assert code == 0 and ids(out) == [lr.pk]
    # `-n 3,5` of an empty queue still says what -n is now, without the whole text among the names.
    code, _, err = run_live(capsys, "queue", "-n", "3,5")
    assert code == 2 and "no job in the queue is named 3, 5: -n is a job's name" in err
