"""What a person reads: the progress line of `muster wait`, the queue's estimates, tables."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from muster_client import render

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)


def job(**fields: Any) -> dict[str, Any]:
    base = {"id": 42, "state": "PENDING", "queue_position": 3, "pending_reason": {"code": "NO_ROOM", "message": "..."}, "attempt": 0}
    return {**base, "wall_time_seconds": 3600, "estimated_start": None, "estimate_kind": "", **fields}


def test_the_wait_line_gives_a_pending_jobs_place_reason_and_eta() -> None:
    line = render.progress_line(job(estimated_start="2026-11-25T12:12:00Z", estimate_kind="reserved"), now=NOW)
    assert line.startswith("job 42 PENDING  position 3  reason NO_ROOM  ETA by ")
    assert line.endswith("(in 12m)")
    assert render.progress_line(job(queue_position=None), now=NOW) == "job 42 PENDING  position new  reason NO_ROOM"


def test_the_wait_line_gives_a_running_jobs_time_against_its_wall_time_and_nodes() -> None:
    running = job(state="RUNNING", started_at="2026-11-25T11:58:30+00:00", assigned_nodes=["n1", "n2", "n3"], attempt=2)
    assert render.progress_line(running, now=NOW) == "job 42 RUNNING  1m30s of 1h  on n1 +2  attempt 2"


def test_estimates_say_what_kind_they_are() -> None:
    assert render.expected_start(job(estimated_start="2026-11-25T12:12:00Z", estimate_kind="planned")).startswith("~")
    assert render.expected_start(job(estimated_start="2026-11-25T12:12:00Z", estimate_kind="after")).startswith("after ")
    assert render.expected_start(job()) == "unknown"


def test_tables_align_their_columns() -> None:
    assert render.table(["ID", "NAME"], [(1, "a-long-name"), (100, None)]).splitlines() == ["ID   NAME", "1    a-long-name", "100  -"]


def test_the_nodes_table_says_what_pods_muster_did_not_start_hold() -> None:
    node = {"name": "gpu-a", "rack": "r1", "state": "READY", "gpus_total": 8, "gpus_free": 2, "gpu_model": "H100"}
    text = render.nodes_text([{**node, "gpus_foreign": 6, "slices_foreign": 0}, {**node, "name": "gpu-b", "gpus_foreign": 0}])
    rows = text.splitlines()
    assert rows[1].startswith("gpu-a") and rows[1].endswith("6 GPUs held by other pods")
    assert rows[2].startswith("gpu-b") and "held by other pods" not in rows[2]


def test_the_nodes_table_counts_one_slice_or_gpu_held_in_the_singular() -> None:
    """A shared node printed "1 slices held by other pods"."""
    node = {"name": "gpu-a", "rack": "r1", "state": "READY", "gpus_total": 8, "gpus_free": 2, "gpu_model": "H100"}
    text = render.nodes_text([{**node, "gpus_foreign": 0, "slices_foreign": 1}, {**node, "name": "gpu-b", "gpus_foreign": 1}])
    rows = text.splitlines()
    assert rows[1].endswith("1 slice held by other pods") and rows[2].endswith("1 GPU held by other pods")
    assert rows[-1] == "2 nodes, 4 of 16 GPUs free"
    assert render.nodes_text([node]).splitlines()[-1] == "1 node, 2 of 8 GPUs free"


def test_a_node_that_takes_no_work_has_no_gpus_free_and_says_its_idle_ones() -> None:
    """A cordoned node read "8/8" free beside "0 of 16 GPUs free" on the last line."""
    node = {"name": "gpu-a", "rack": "r1", "state": "READY", "gpus_total": 8, "gpus_free": 8, "gpus_idle": 8, "gpu_model": "H100"}
    cordoned = {**node, "name": "gpu-b", "state": "CORDONED", "closed_by": "cordoned", "gpus_free": 0, "gpus_idle": 6}
    old_server = {**node, "name": "gpu-c", "state": "NOT_READY", "gpus_free": 8}  # before gpus_idle: idle counted free
    del old_server["gpus_idle"]
    rows = render.nodes_text([node, cordoned, old_server]).splitlines()
    assert rows[1].split()[:4] == ["gpu-a", "r1", "READY", "8/8"]
    assert rows[2].split()[:5] == ["gpu-b", "r1", "CORDONED", "0/8", "(6"] and "(6 idle)" in rows[2]
    assert "NOT_READY  0/8 (8 idle)" in rows[3]
    assert rows[-1] == "3 nodes, 8 of 24 GPUs free"


def test_sizes_read_like_sbatch_and_say_what_a_slice_or_an_elastic_job_holds() -> None:
    whole = job(nodes=2, gpus_per_node=8, gpus=16)
    assert (render.shape(whole), render.gpus(whole)) == ("2x8", "16 GPUs")
    single = job(nodes=1, gpus_per_node=1, gpus=1)
    assert (render.shape(single), render.gpus(single)) == ("1x1", "1 GPU")
    # A quarter of a GPU is stored as one node with one GPU; shown so, it would read as a whole GPU.
    quarter = job(nodes=1, gpus_per_node=1, gpus=1, gpu_fraction=0.25)
    assert (render.shape(quarter), render.gpus(quarter)) == ("1x0.25", "a GPU slice: 0.25 of a GPU")
    by_memory = job(nodes=1, gpus_per_node=1, gpus=1, gpu_memory_gb=10.0, gpu_isolation=True)
    assert (render.shape(by_memory), render.gpus(by_memory)) == ("1x10GB", "a GPU slice: 10 GB of GPU memory, isolated (MIG)")
    elastic = job(nodes=4, min_nodes=2, max_nodes=4, gpus_per_node=8, gpus=32)
    assert (render.shape(elastic), render.gpus(elastic)) == ("2-4x8", "16 to 32 GPUs")
    assert render.gpus({**elastic, "state": "RUNNING", "nodes": 3, "gpus": 24}) == "24 GPUs on 3 nodes now"
    assert render.gpus({**elastic, "state": "RUNNING", "nodes": 1, "gpus": 8}) == "8 GPUs on 1 node now"
    assert render.shape({**elastic, "state": "RUNNING", "nodes": 3}) == "3(2-4)x8"  # it read 2-4x8, not what it holds
    row = render.jobs_table([{**quarter, "name": "eval", "owner": "ann", "submitted_at": None}]).splitlines()[1]
    assert row.split()[:5] == ["42", "eval", "ann", "PENDING", "1x0.25"]


def test_time_held_counts_from_placement_as_the_wall_time_does() -> None:
    # Placed at 11:58:00, its containers up at 11:58:30 (an image pull): 2 minutes of its hour are gone, not 1m30s.
    running = job(state="RUNNING", scheduled_at="2026-11-25T11:58:00+00:00", started_at="2026-11-25T11:58:30+00:00", attempt=1)
    assert render.elapsed(running, now=NOW) == "2m"
    assert render.progress_line({**running, "assigned_nodes": ["n1"]}, now=NOW).startswith("job 42 RUNNING  2m of 1h")
    # A job placed but not up yet has held its GPUs as long.
    assert render.elapsed(job(state="SCHEDULED", scheduled_at="2026-11-25T11:59:00+00:00"), now=NOW) == "1m"
    assert render.elapsed(job()) == "-"
    # Back in the queue after a launch that failed, it holds nothing: no time from its last placement.
    assert render.elapsed(job(state="PENDING", scheduled_at="2026-11-25T11:59:00+00:00", attempt=1), now=NOW) == "-"


def test_the_jobs_table_says_whose_each_job_is() -> None:
    rows = [
        job(name="mine", owner="ann", state="RUNNING", nodes=1, gpus_per_node=8, submitted_at="2026-11-25T11:00:00Z"),
        job(name="theirs", owner="bob", state="PENDING", nodes=2, gpus_per_node=8, submitted_at="2026-11-25T11:30:00Z"),
    ]
    lines = render.jobs_table(rows).splitlines()
    assert lines[0].split()[:4] == ["ID", "NAME", "USER", "STATE"]
    assert [line.split()[1:4] for line in lines[1:]] == [["mine", "ann", "RUNNING"], ["theirs", "bob", "PENDING"]]


GREW = "Grew onto whole nodes left idle"


def test_show_lists_an_elastic_jobs_resizes_after_its_history() -> None:
    """An elastic job that grew from 8 to 12 nodes showed only submit, placement and running: its size moved without a
    state change."""
    grown = job(
        state="RUNNING", name="pretrain", owner="ann", image="img", command=["python", "train.py"], nodes=12, gpus_per_node=8,
        min_nodes=8, max_nodes=12, gpus=96, priority_class="normal", restarts=0, max_restarts=0, attempt=1,
        events=[{"at": "2026-11-25T11:00:00Z", "from_state": "", "to_state": "PENDING", "reason": "Submitted."}],
        resizes=[
            {"at": "2026-11-25T11:05:00Z", "attempt": 1, "from_nodes": 8, "to_nodes": 11, "reason": f"{GREW}: from 8 to 11 nodes."},
            {"at": "2026-11-25T11:09:00Z", "attempt": 2, "from_nodes": 11, "to_nodes": 12, "reason": f"{GREW}: from 11 to 12 nodes."},
        ],
    )  # fmt: skip
    lines = render.job_lines(grown)
    resizes = lines[lines.index("resizes") + 1 :]
    assert lines.index("history") < lines.index("resizes") and len(resizes) == 2
    assert resizes[0].endswith("  attempt 1    8 -> 11  nodes  Grew onto whole nodes left idle: from 8 to 11 nodes.")
    assert "  attempt 2   11 -> 12 " in resizes[1]  # after a requeue, which attempt a resize was in
    assert "resizes" not in render.job_lines({**grown, "resizes": []})


def test_show_dates_its_history_to_the_second_whatever_the_day() -> None:
    """Events of an earlier day read `2026-11-28 23:57` beside today's `00:01:14`: their seconds lost, columns askew."""
    before, after = datetime(2026, 11, 28, 23, 57, 41, tzinfo=UTC), datetime(2026, 11, 29, 0, 1, 14, tzinfo=UTC)
    events = [
        {"at": before.isoformat(), "from_state": "", "to_state": "PENDING", "reason": "Submitted."},
        {"at": after.isoformat(), "from_state": "PENDING", "to_state": "SCHEDULED", "reason": "Placed."},
    ]
    lines = render.job_lines(job(name="a", owner="ann", image="i", command=["x"], nodes=1, gpus_per_node=1, gpus=1,
                                 priority_class="normal", restarts=0, max_restarts=0, events=events))  # fmt: skip
    history = lines[lines.index("history") + 1 :]
    local = f"{before.astimezone():%Y-%m-%d %H:%M:%S}", f"{after.astimezone():%Y-%m-%d %H:%M:%S}"
    assert history[0].startswith(f"  {local[0]}          - -> PENDING ")
    assert history[1].startswith(f"  {local[1]}    PENDING -> SCHEDULED ")
    # Elsewhere a time keeps its seconds on another day too.
    assert render.when(before.isoformat(), now=before + timedelta(days=1)) == local[0]
    assert render.when(before.isoformat(), now=before) == local[0][11:]


def test_node_lists_read_as_squeues_ranges() -> None:
    assert render.hostlist(["sim-node-000", "sim-node-001", "sim-node-002", "sim-node-007"]) == "sim-node-[000-002,007]"
    assert render.hostlist(["gpu-a"]) == "gpu-a" and render.hostlist(["n1"]) == "n1" and render.hostlist([]) == "-"


def test_a_running_jobs_time_left_counts_from_its_placement() -> None:
    placed = {"wall_time_seconds": 3600, "scheduled_at": "2026-11-25T11:40:00Z", "started_at": "2026-11-25T11:45:00Z"}
    assert render.time_left(placed, now=NOW) == "40m"
    assert render.time_left({**placed, "scheduled_at": "2026-11-25T10:00:00Z"}, now=NOW) == "0s"  # spent: about to stop


def test_the_queue_names_an_arrays_elements_as_squeue_does() -> None:
    """Array elements read as plain ids 5…10, though `muster cancel 5_5` and squeue name them `5_5`."""
    pending = {"id": 7, "name": "sweep", "owner": "ann", "nodes": 1, "gpus_per_node": 8, "position": 1, "priority": None}
    queue = {"count": 2, "summary": {"pending": 2}, "results": [{**pending, "array_id": 5, "array_index": 2}, {**pending, "id": 9}]}
    placed = (NOW - timedelta(minutes=5)).isoformat()
    running = [
        {**pending, "id": 5, "state": "RUNNING", "array_id": 5, "array_index": 0, "wall_time_seconds": 3600, "scheduled_at": placed},
    ]
    lines = render.queue_table(queue, running, now=NOW).splitlines()
    assert lines[0].split()[:3] == ["ID", "ARRAY", "NAME"]
    assert [line.split()[:3] for line in lines[1:-1]] == [["7", "5_2", "sweep"], ["9", "-", "sweep"], ["5", "5_0", "sweep"]]
    # No element in the queue: no column.
    assert render.queue_table({**queue, "results": [{**pending, "id": 9}]}, now=NOW).splitlines()[0].split()[:2] == ["ID", "NAME"]


def test_usage_says_the_gpus_borrowed_beyond_the_quota_apart_from_those_within_it() -> None:
    """A quota read "40/40", full, while 8 of the 40 GPUs were borrowed by preemptible jobs."""
    from muster_client.render import usage_text

    def account(kind: str, name: str, max_gpus: int | None, usage: dict[str, object]) -> dict[str, object]:
        used = {"node_hours_used": 0.0, "node_hours_left": None, "gpu_hours_used": 0.0, **usage}
        limits = {"max_wall_time_seconds": None, "max_node_hours_per_job": None, "node_hours_per_period": None}
        return {"account": kind, "name": name, "max_gpus": max_gpus, "usage": used, **limits}

    summary = {
        "period_start": "2026-11-01T00:00:00Z",
        "period_end": "2026-12-01T00:00:00Z",
        "user": account("user", "ann", 40, {"gpus_in_use": 40, "gpus_within_quota": 32, "gpus_borrowed": 8}),
        "teams": [
            account("team", "vision", None, {"gpus_in_use": 8, "gpus_within_quota": 8, "gpus_borrowed": 0}),
            account("team", "old", 4, {"gpus_in_use": 2}),  # a server before the split
        ],
    }
    rows = {line.split()[1]: line.split()[2] for line in usage_text(summary).splitlines()[2:]}
    assert rows == {"ann": "32/40+8", "vision": "8/unlimited", "old": "2/4"}


def test_usage_says_node_hours_added_to_this_period_beside_the_budget() -> None:
    """An admin added 10 node-hours to this period (POST .../grant/): BUDGET read 30 beside 38 left of 40."""
    from muster_client.render import usage_text

    usage = {"gpus_in_use": 0, "node_hours_used": 2.0, "node_hours_left": 38.0, "node_hours_granted": 10.0, "gpu_hours_used": 16.0}
    team = {"account": "team", "name": "vision", "max_gpus": None, "max_wall_time_seconds": None, "max_node_hours_per_job": None}
    user = {**team, "account": "user", "name": "ann", "node_hours_per_period": None}
    summary = {
        "period_start": "2026-11-01T00:00:00Z",
        "period_end": "2026-12-01T00:00:00Z",
        "user": {**user, "usage": {**usage, "node_hours_granted": 0.0, "node_hours_left": None}},
        "teams": [{**team, "node_hours_per_period": 30.0, "usage": usage}],
    }
    rows = {line.split()[1]: line.split()[3:6] for line in usage_text(summary).splitlines()[2:]}
    assert rows["vision"] == ["2.0", "30+10", "38.0"]
    assert rows["ann"] == ["2.0", "unlimited", "-"]


def test_usage_says_the_budget_period_as_the_usage_page_does() -> None:
    """It printed `2026-11-01 00:00:00 to 2026-12-01 00:00:00` where the page said 1 Nov 2026 to 30 Nov 2026: the end is
    exclusive, so its midnight is not the period's last day. The days are the server's, whose zone counts the periods."""
    from muster_client.render import budget_period, usage_text

    assert budget_period("2026-11-01T00:00:00Z", "2026-12-01T00:00:00Z") == "1 Nov 2026 to 30 Nov 2026 (resets 1 Dec 2026 00:00 UTC)"
    # A week in Berlin (MUSTER_BUDGET_PERIOD=week): its days there, wherever the terminal is.
    assert (
        budget_period("2026-11-23T00:00:00+01:00", "2026-11-30T00:00:00+01:00")
        == "23 Nov 2026 to 29 Nov 2026 (resets 30 Nov 2026 00:00 UTC+01:00)"
    )
    december = budget_period("2026-12-01T00:00:00-05:00", "2027-01-01T00:00:00-05:00")
    assert december == "1 Dec 2026 to 31 Dec 2026 (resets 1 Jan 2027 00:00 UTC-05:00)"
    account = {
        "account": "user",
        "name": "ann",
        "max_gpus": None,
        "max_wall_time_seconds": None,
        "max_node_hours_per_job": None,
        "node_hours_per_period": None,
        "usage": {"gpus_in_use": 0, "node_hours_used": 0.0, "node_hours_left": None, "gpu_hours_used": 0.0},
    }
    summary = {"period_start": "2026-11-01T00:00:00Z", "period_end": "2026-12-01T00:00:00Z", "user": account, "teams": []}
    assert usage_text(summary).splitlines()[0] == "Budget period 1 Nov 2026 to 30 Nov 2026 (resets 1 Dec 2026 00:00 UTC)"
