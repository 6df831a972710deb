"""How the pages say a time since: 'just now' / '4 minutes ago' after an event, 'waiting 4 minutes' for a queued job."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone

from frontend.templatetags import muster


def ago(moment: datetime | None) -> str:
    return muster.ago(moment).replace("\xa0", " ")  # Django's timesince keeps a number and its unit together


def waited(moment: datetime | None) -> str:
    return muster.waited(moment).replace("\xa0", " ")


def test_a_queued_job_has_waited_a_span_not_a_moment_ago() -> None:
    now = timezone.now()
    assert (ago(now), waited(now)) == ("just now", "under a minute")
    assert (ago(now - timedelta(minutes=4, seconds=5)), waited(now - timedelta(minutes=4, seconds=5))) == ("4 minutes ago", "4 minutes")
    assert waited(now - timedelta(hours=2, minutes=3)) == "2 hours, 3 minutes"
    assert (ago(None), waited(None)) == ("", "")


def test_a_priority_factor_too_small_for_three_decimals_keeps_three_figures() -> None:
    """An age of 0.0002 read 0.000 beside the 0.1 it adds (weight 500)."""
    assert [muster.factor(v) for v in (0.0002, 0.0, 0.51234, 1.0)] == ["0.0002", "0.000", "0.512", "1.000"]
    # A job queued a second ago: no exponent form (it read 9.17e-07) in a column of decimals.
    assert [muster.factor(v) for v in (9.17e-07, 0.0001, 0.00099)] == ["< 0.0001", "0.0001", "0.00099"]


def test_an_ended_elastic_job_says_the_nodes_it_held_at_its_end(user: Any) -> None:
    """It read its ask, "2-6 nodes x 8 GPUs", after running on 6."""
    from frontend.templatetags.muster import job_size, job_size_short
    from tests.jobs.factories import JobFactory

    ended = JobFactory(owner=user, finished=True, nodes=6, min_nodes=2, max_nodes=6)
    assert job_size(ended) == "2 to 6 nodes (elastic, 6 at its end) \u00d7 8 GPUs"
    assert job_size_short(ended) == "6 (2\u20136) nodes \u00d7 8 GPUs"
    never = JobFactory(owner=user, state="CANCELLED", nodes=2, min_nodes=2, max_nodes=6)
    assert job_size(never) == "2 to 6 nodes (elastic) \u00d7 8 GPUs"


def test_a_jobs_nodes_read_as_squeues_nodelist() -> None:
    """As `muster queue` writes them: a 12-node job's list ran to twelve lines in the attempts table at 390 px."""
    names = [f"sim-node-{n:03d}" for n in (*range(8), 9, 10, 11, 12)]
    assert muster.hostlist(names) == "sim-node-[000-007,009-012]"
    assert muster.hostlist(["sim-node-003"]) == "sim-node-003"
    assert muster.hostlist(["gpu-a", "n-1", "n-2"]) == "n-[1-2],gpu-a"
    assert muster.hostlist([]) == ""
