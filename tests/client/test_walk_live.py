"""What a Slurm user's walk of `muster` found, against the server in this process: array elements by `ID_INDEX`,
`queue -n` and `-u`, what a gang holds, `logs -f --tail`, one JSON shape for every cancel, a hold an admin already has."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from muster_client import config

from accounts.services import token_create
from jobs.models import Job
from tests.client.cli_run import run_live as run
from tests.conftest import SimHarness
from tests.jobs.factories import JobFactory

IMAGE = "busybox:1.36"


def submit_array(capsys: pytest.CaptureFixture[str], indices: str, *extra: str) -> tuple[int, str]:
    code, out, err = run(capsys, "submit", "-G", "1", "-t", "1h", "--image", IMAGE, "--array", indices, *extra, "--", "python", "s.py")
    assert code == 0, err
    return int(re.match(r"Submitted array (\d+):", out).group(1)), out  # type: ignore[union-attr]


def test_an_arrays_element_is_named_id_index_and_never_read_as_another_job(
    signed_in: Any, tx_sim: SimHarness, capsys: pytest.CaptureFixture[str]
) -> None:
    """int("1_2") is 12: `muster show 1_2` showed job 12. Now it is element 2 of array 1, as squeue names it."""
    array_id, out = submit_array(capsys, "0-2")
    elements = {job.array_index: job.pk for job in Job.objects.filter(array_id=array_id)}
    code, out, _ = run(capsys, "show", f"{array_id}_2")
    assert code == 0 and out.splitlines()[0].split() == ["id", str(elements[2])]
    assert f"array           {array_id} index 2" in out
    code, out, _ = run(capsys, "why", f"{array_id}_1")
    assert code == 0 and out.startswith(f"Job {elements[1]} (python) is PENDING")
    code, out, _ = run(capsys, "jobs", "--array", str(array_id))
    assert code == 0 and out.splitlines()[0].split()[-1] == "ARRAY"
    assert sorted(line.split()[-1] for line in out.splitlines()[1:]) == [f"{array_id}_{i}" for i in range(3)]
    code, _, err = run(capsys, "show", f"{array_id}_9")
    assert code == 5 and err == f"muster: error: No job {array_id}_9: array {array_id} has no element 9 (or none that you may see).\n"
    # One element, one job: said so.
    array_id, out = submit_array(capsys, "5")
    assert out == f"Submitted array {array_id}: 1 job, {array_id} (muster jobs --array {array_id})\n"


def test_queue_limit_keeps_the_first_rows_in_order_and_the_summary_counts_the_whole_queue(
    signed_in: Any, tx_sim: SimHarness, django_user_model: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """`muster queue -n 3` kept the newest running jobs, not the oldest, and said "1 running" of 3."""
    erin = django_user_model.objects.create_user(username="erin")
    mine = [JobFactory(owner=signed_in, name=f"run{i}", nodes=1, gpus_per_node=8, queued=True, history=True) for i in range(3)]
    theirs = JobFactory(owner=erin, name="theirs", nodes=1, gpus_per_node=8, queued=True, history=True)
    tx_sim.cycle()
    tx_sim.advance(2)
    waits = JobFactory(owner=erin, name="waits", nodes=16, gpus_per_node=8, queued=True, history=True)
    tx_sim.cycle()

    code, out, _ = run(capsys, "queue")
    assert code == 0 and [line.split()[0] for line in out.splitlines()[1:-1]] == [str(waits.pk), *(str(j.pk) for j in mine)]
    whole = out.splitlines()[-1]
    assert whole.endswith("3 running, 0 starting (of 4 on the cluster: others' jobs are listed to their owners and admins only)")

    code, out, _ = run(capsys, "queue", "--limit", "3")
    assert code == 0 and [line.split()[0] for line in out.splitlines()[1:-1]] == [str(waits.pk), str(mine[0].pk), str(mine[1].pk)]
    assert re.fullmatch(
        r"3 shown; in the whole queue 1 pending \(.+\), 4 running or starting "
        r"\(others' jobs on their nodes are listed to their owners and admins only\)",
        out.splitlines()[-1],
    ), out

    # Another user's jobs: her pending ones, as the queue lists every user's; her running ones are not dana's to see.
    code, out, err = run(capsys, "queue", "-u", "erin")
    assert code == 0, err
    assert [line.split()[:3] for line in out.splitlines()[1:-1]] == [[str(waits.pk), "waits", "erin"]]
    assert str(theirs.pk) not in [line.split()[0] for line in out.splitlines()[1:-1]]
    assert out.splitlines()[-1].startswith("1 shown; in the whole queue 1 pending (")
    assert out.splitlines()[-1].endswith("4 running or starting (others' jobs on their nodes are listed to their owners and admins only)")


def test_show_says_what_a_gang_holds_when_it_asks_part_of_each_node(
    signed_in: Any, tx_sim: SimHarness, capsys: pytest.CaptureFixture[str]
) -> None:
    """2 nodes x 4 GPUs holds both nodes whole: the API's gpus_held and usage say 16, `muster show` said "2x4 (8 GPUs)"."""
    gang = JobFactory(owner=signed_in, name="gang", nodes=2, gpus_per_node=4, queued=True, history=True)
    tx_sim.cycle()
    _, out, _ = run(capsys, "show", str(gang.pk), "--json")
    job = json.loads(out)
    assert (job["gpus"], job["gpus_held"]) == (8, 16)
    _, out, _ = run(capsys, "show", str(gang.pk))
    assert "nodes x gpus    2x8(4) (holds 16 GPUs, its 2 nodes whole, as usage counts them; asked 8)" in out.splitlines()
    _, out, _ = run(capsys, "queue")
    assert out.splitlines()[1].split()[:5] == [str(gang.pk), "gang", "dana", "SCHEDULED", "2x8(4)"]
    _, out, _ = run(capsys, "jobs")
    assert out.splitlines()[1].split()[4] == "2x8(4)"


def test_logs_follow_starts_from_the_last_lines_asked(
    signed_in: Any, tx_sim: SimHarness, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`muster logs -f --tail 1` printed the whole output, as tail -n 1 -f does not."""
    spec = tmp_path / "job.yaml"
    spec.write_text("image: busybox:1.36\ncommand: python x.py\ngpus_per_node: 1\nsimulate: {duration_seconds: 5}\n")
    _, out, _ = run(capsys, "submit", str(spec), "-t", "1h", "--json")
    job_id = str(json.loads(out)["id"])
    tx_sim.cycle()
    tx_sim.advance(10)
    tx_sim.cycle()
    code, whole, _ = run(capsys, "logs", job_id)
    assert code == 0 and len(whole.splitlines()) > 1
    code, out, _ = run(capsys, "logs", "-f", "--tail", "1", job_id)
    assert code == 0 and out.splitlines() == whole.splitlines()[-1:]


def test_cancel_json_is_one_shape_for_one_job_several_an_array_and_a_refusal(
    signed_in: Any, tx_sim: SimHarness, capsys: pytest.CaptureFixture[str]
) -> None:
    keys = {"cancelled", "ended", "not_found", "arrays", "errors"}
    ids = []
    for _ in range(3):
        code, out, _ = run(capsys, "submit", "-G", "1", "-t", "1h", "--image", IMAGE, "--json", "--", "python", "x.py")
        ids.append(json.loads(out)["id"])
    code, out, _ = run(capsys, "cancel", "--json", str(ids[0]))
    one = json.loads(out)
    assert code == 0 and set(one) == keys and [job["id"] for job in one["cancelled"]] == [ids[0]]
    code, out, _ = run(capsys, "cancel", "--json", str(ids[1]), str(ids[2]))
    assert code == 0 and set(json.loads(out)) == keys and len(json.loads(out)["cancelled"]) == 2
    array_id, _ = submit_array(capsys, "0-1")
    code, out, _ = run(capsys, "cancel", "--json", str(array_id))
    whole = json.loads(out)
    assert code == 0 and set(whole) == keys and len(whole["cancelled"]) == 2 and whole["arrays"][0]["array_id"] == array_id
    # A refusal is JSON too, with what went wrong (and said on stderr as ever).
    code, out, err = run(capsys, "cancel", "--json", str(ids[0]), "999999")
    refused = json.loads(out)
    assert code == 5 and set(refused) == keys
    assert [job["id"] for job in refused["ended"]] == [ids[0]] and refused["not_found"] == [999999]
    assert refused["errors"] == [
        f"Job {ids[0]} has already ended (CANCELLED); there is nothing to cancel.",
        "No job 999999 (or none that you may see).",
    ]
    assert err.count("muster: error: ") == 2
    # A job cancelled before it ran ended "without starting", not "after -".
    code, out, _ = run(capsys, "wait", str(ids[0]))
    assert code == 1 and out.startswith(f"Job {ids[0]} CANCELLED without starting: ")


def test_login_with_a_token_keeps_that_token(
    signed_in: Any, live_server: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`muster login --token T URL` asked for a password and made a new token: T was ignored."""
    monkeypatch.delenv("MUSTER_URL")
    secret = token_create(user=signed_in, name="laptop").secret
    monkeypatch.setattr("builtins.input", lambda prompt="": pytest.fail("asked for a username"))
    code, out, err = run(capsys, "login", "--token", secret, live_server.url)
    assert code == 0, err
    assert out == f"Logged in to {live_server.url} as dana with the token given. Token saved in {config.config_path()}.\n"
    assert config.resolve().token == secret
    code, _, err = run(capsys, "login", "--token", "not-a-token", live_server.url)
    assert code == 4 and config.resolve().token == secret


def test_a_job_cancelled_after_its_launches_failed_never_started_in_show_jobs_and_wait(
    signed_in: Any, tx_sim: SimHarness, capsys: pytest.CaptureFixture[str]
) -> None:
    """It read `elapsed 0s`, as if it had run for no time (the moment its launch held its node)."""
    from jobs.lifecycle import job_launch_failed

    code, out, err = run(capsys, "submit", "-G", "8", "-t", "1h", "--image", IMAGE, "--json", "--", "python", "x.py")
    assert code == 0, err
    job_id = json.loads(out)["id"]
    tx_sim.cycle()
    job_launch_failed(Job.objects.get(pk=job_id), now=tx_sim.clock(), why="The image could not be pulled.")
    assert run(capsys, "cancel", str(job_id))[0] == 0
    code, out, _ = run(capsys, "show", str(job_id))
    assert code == 0 and "elapsed         never started\n" in out
    code, out, _ = run(capsys, "jobs", "-s", "CA")
    header, row = out.splitlines()[:2]
    assert row.split()[0] == str(job_id) and row.split()[header.split().index("ELAPSED")] == "-"
    code, out, _ = run(capsys, "wait", str(job_id))
    assert code == 1 and out.startswith(f"Job {job_id} CANCELLED without starting: ")
