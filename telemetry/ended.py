"""/metrics' `muster_jobs_ended` (jobs that have ended, by final state) as running totals written with each end.

A scrape counted the ended jobs by state: every job ever submitted but the few still queued or running, read on every
scrape (an index-only scan, or the table, growing by every job a site runs). Each end now adds 1 to its state's
`EndedJobsTotal` row in the transaction that records it (the `event_recorded` hook, registered by `telemetry.apps`), and
a scrape reads the four rows.

Never lower at a later scrape (it is a counter): a total is only added to (`F()`, one row, so concurrent ends lose
nothing), once per end (a job reaches a final state once: `jobs.states` has no way out of one), and nothing deletes
them; an admin deleting an ended job lowered the count when it was counted from the jobs, and no longer does.
Migration telemetry 0005 counted the ended jobs as /metrics did, so the first scrape after it reads what the last one
before it read; ends an older worker records after the migration (a rolling upgrade) are counted by neither, as for
the latency totals (telemetry/latency.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.db import transaction
from django.db.models import Count

from jobs.models import Job
from jobs.states import TERMINAL_STATES
from telemetry.models import EndedJobsTotal
from telemetry.totals import add_to_total

if TYPE_CHECKING:
    from jobs.models import JobEvent


def ended_event_recorded(*, event: JobEvent) -> None:
    """The `event_recorded` hook: an end (an event into a final state) adds 1 to its state's total, in the transaction
    that records it."""
    if event.to_state not in TERMINAL_STATES or event.from_state in TERMINAL_STATES:
        return
    add_to_total(EndedJobsTotal, {"state": event.to_state}, jobs=1)


def ended_jobs() -> dict[str, int]:
    """Jobs that have ended, by final state (states none has ended in are missing): the totals, one query of four rows."""
    return dict(EndedJobsTotal.objects.values_list("state", "jobs"))


@transaction.atomic
def ended_recount() -> None:
    """The totals counted again from the jobs, replacing them: for histories written in bulk (the benchmarks' fills),
    which `JobEvent.save` and so the hook never see. Not for a live site: ends recorded meanwhile may be lost."""
    counted = Job.objects.filter(state__in=TERMINAL_STATES).values_list("state").annotate(n=Count("id")).order_by()
    EndedJobsTotal.objects.all().delete()
    EndedJobsTotal.objects.bulk_create(EndedJobsTotal(state=state, jobs=n) for state, n in counted)
