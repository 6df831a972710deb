"""Trace parsing: both formats, gangs, the runtime cap, gzip, and bad rows with their line numbers."""

from __future__ import annotations

import gzip
from datetime import UTC, datetime
from pathlib import Path

import pytest

from replay.trace import Assumptions, TraceError, open_trace, read_trace

PHILLY = """timestamp,duration,num_gpus,gpu_time,cluster
2017-09-04 10:30:41,2240194.0,8,17921552.0,7f04ca
2017-09-04 10:00:00,100.0,1,100.0,6214e9
2017-09-04 11:00:00,3601.0,24,86424.0,11cb48
2017-09-04 12:00:00,50,12,600,11cb48
"""


def test_philly_rows_sorted_numbered_capped_and_gangs() -> None:
    jobs = read_trace(PHILLY.splitlines(keepends=True), assumptions=Assumptions())
    assert [j.id for j in jobs] == [1, 2, 3, 4]
    first, long, gang, odd = jobs
    assert first.tenant == "6214e9" and first.runtime == 100.0 and first.wall_seconds == 3600.0
    assert first.submit == datetime(2017, 9, 4, 10, 0, tzinfo=UTC).timestamp()
    assert (first.nodes, first.gpus_per_node, first.user) == (1, 1, "")
    assert long.runtime == 7 * 24 * 3600.0 and long.wall_seconds == 7 * 24 * 3600.0  # cut to the cap
    assert (gang.nodes, gang.gpus_per_node, gang.gpus, gang.wall_seconds) == (3, 8, 24, 7200.0)
    assert (odd.nodes, odd.gpus_per_node, odd.gpus) == (2, 8, 12)


def test_no_cap_and_a_window() -> None:
    a = Assumptions(runtime_cap_seconds=None)
    jobs = read_trace(PHILLY.splitlines(), assumptions=a)
    assert max(j.runtime for j in jobs) == 2240194.0
    window = read_trace(
        PHILLY.splitlines(), assumptions=a, start=datetime(2017, 9, 4, 10, 30, tzinfo=UTC), end=datetime(2017, 9, 4, 12, tzinfo=UTC)
    )
    assert [(j.id, j.tenant) for j in window] == [(1, "7f04ca"), (2, "11cb48")]


@pytest.mark.parametrize(
    ("row", "words"),
    [
        ("2017-09-04 10:00:00,abc,1,1,x", "duration"),
        ("2017-09-04 10:00:00,10,0,1,x", "num_gpus"),
        ("2017-09-04 10:00:00,10,1.5,1,x", "num_gpus"),
        ("not a date,10,1,1,x", "timestamp"),
        ("2017-09-04 10:00:00,-5,1,1,x", "negative"),
        ("2017-09-04 10:00:00,10,1,1,", "cluster"),
        ("2017-09-04 10:00:00,10,1,1", "fields"),
    ],
)
def test_a_bad_row_names_its_line(row: str, words: str) -> None:
    lines = [*PHILLY.splitlines()[:3], row, *PHILLY.splitlines()[3:]]
    with pytest.raises(TraceError) as caught:
        read_trace(lines, assumptions=Assumptions())
    assert caught.value.line == 4
    assert words in caught.value.message
    assert str(caught.value).startswith("line 4: ")


def test_an_unknown_header_is_line_one() -> None:
    with pytest.raises(TraceError) as caught:
        read_trace(["a,b,c", "1,2,3"], assumptions=Assumptions())
    assert caught.value.line == 1
    with pytest.raises(TraceError):
        read_trace([], assumptions=Assumptions())


HISTORY = """submitted_at,started_at,ended_at,nodes,gpus_per_node,wall_time_seconds,owner,team,priority_class,runtime_seconds
2024-01-01T00:00:00+00:00,2024-01-01T00:10:00+00:00,2024-01-01T01:10:00+00:00,2,8,7200,alice,vision,production,
2024-01-01T00:05:00Z,,,1,4,,bob,,normal,1800
2024-01-01T00:06:00+00:00,2024-01-01T00:10:00+00:00,2024-01-01T05:10:00+00:00,1,2,3600,carol,nlp,preemptible,
"""


def test_history_header_variant() -> None:
    alice, bob, carol = read_trace(HISTORY.splitlines(), assumptions=Assumptions())
    assert (alice.nodes, alice.gpus_per_node, alice.gpus, alice.runtime, alice.wall_seconds) == (2, 8, 16, 3600.0, 7200.0)
    assert (alice.user, alice.tenant, alice.class_rank) == ("alice", "vision", 0)
    assert (bob.user, bob.tenant, bob.runtime, bob.wall_seconds, bob.class_rank) == ("bob", "bob", 1800.0, 3600.0, 1)
    assert carol.runtime == 3600.0 and carol.class_rank == 2  # cut to its wall time


def test_history_bad_row() -> None:
    lines = [*HISTORY.splitlines(), "2024-01-01T00:00:00Z,,,1,16,,dave,,normal,10"]
    with pytest.raises(TraceError) as caught:
        read_trace(lines, assumptions=Assumptions())
    assert caught.value.line == 5 and "gpus_per_node" in caught.value.message


def test_open_trace_reads_gzip(tmp_path: Path) -> None:
    plain = tmp_path / "t.csv"
    plain.write_text(PHILLY)
    packed = tmp_path / "t.csv.gz"
    with gzip.open(packed, "wt") as f:
        f.write(PHILLY)
    a = Assumptions()
    assert read_trace(open_trace(packed), assumptions=a) == read_trace(open_trace(plain), assumptions=a)
    assert len(read_trace(open_trace(packed), assumptions=a)) == 4


def test_assumptions_describe_and_validate() -> None:
    assert any("checkpoint" in s for s in Assumptions(resume="checkpoint").describe())
    with pytest.raises(ValueError):
        Assumptions(resume="sometimes")


def test_every_job_preemptible_is_said_and_marks_each_job() -> None:
    a = Assumptions(all_preemptible=True)
    assert all(job.preemptible for job in read_trace(PHILLY.splitlines(), assumptions=a))
    assert not any(job.preemptible for job in read_trace(PHILLY.splitlines(), assumptions=Assumptions()))
    assert any("Every job is preemptible" in s for s in a.describe())


def test_a_stated_share_of_the_jobs_is_of_the_highest_class() -> None:
    lines = ["timestamp,duration,num_gpus,gpu_time,cluster"] + [f"2017-10-01 00:0{i}:00,3600,1,0,vc1" for i in range(10)]
    a = Assumptions(production_share=0.2)
    # Evenly spread in submit order: the 5th and 10th jobs (every fifth); the rest keep the trace's class (normal).
    assert [j.class_rank for j in read_trace(lines, assumptions=a)] == [1, 1, 1, 1, 0, 1, 1, 1, 1, 0]
    assert any("20% of the jobs" in s and "production" in s for s in a.describe())
    assert not any("of the class" in s for s in Assumptions().describe())
    with pytest.raises(ValueError, match="production_share"):
        Assumptions(production_share=1.5)
