"""Server-side sorting of the pages' tables of jobs: `?sort=<column>` ascending, `?sort=-<column>` descending.

Each table has an allow-list of columns, each with the order it sorts by; an empty value is the table's default
order, and any other (a typo, a column the table does not have) is refused with the columns there are
(`sort_refusal`): the pages answer a 400 naming them, as the job list API does its `?ordering=`, where a page that
quietly showed its default order read as sorted as asked. A header link asks for its
column in the direction a reader expects first (newest, largest, highest first for times, sizes and
priorities), and for the other direction once its column is the one sorted by. Every order ends with the job's
id, so pages never share or skip a row.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from django.conf import settings
from django.db.models import Case, DurationField, F, FloatField, IntegerField, Q, QuerySet, Value, When
from django.db.models.expressions import BaseExpression, OrderBy
from django.db.models.functions import Cast, Coalesce, Lower, Now

from jobs.models import Job
from jobs.states import ACTIVE_STATES, TERMINAL_STATES, JobState


@dataclass(frozen=True)
class Column:
    key: str
    # What it sorts by, each (expression, ascending) for the column's ascending order; the descending order flips each.
    order: tuple[tuple[F | BaseExpression, bool], ...]
    # A first click sorts descending (times, sizes, priorities: the newest, largest, highest first).
    descending_first: bool = False


def sort_choices(columns: Sequence[Column]) -> str:
    """The sorts a table takes, in a refusal's words (the API's `?ordering=` says them too)."""
    return f"sort by {', '.join(c.key for c in columns)}, each reversed with a leading -."


def sort_refusal(columns: Sequence[Column], asked: str) -> str:
    """Why `asked` is no sort of this table, naming the ones it takes; "" for one of them, or none asked (empty)."""
    if not asked or asked.removeprefix("-") in {c.key for c in columns}:
        return ""
    return f"Cannot sort by {asked}; {sort_choices(columns)}"


class Sorting:
    """One table's sort as the query string asks it (`asked`), within `columns`; none asked is `default`, and so is one
    `sort_refusal` refuses (which the caller says)."""

    def __init__(self, columns: Sequence[Column], asked: str, *, default: str) -> None:
        self.columns = {c.key: c for c in columns}
        self.default = default
        key = asked.removeprefix("-")
        if key not in self.columns:
            asked, key = default, default.removeprefix("-")
        self.key = key
        self.descending = asked.startswith("-")

    @property
    def value(self) -> str:
        """The `sort=` value of the order in force."""
        return f"-{self.key}" if self.descending else self.key

    @property
    def is_default(self) -> bool:
        return self.value == self.default

    def order_by(self) -> list[OrderBy]:
        """The queryset order: the column's expressions, then the id, each in this direction; no value sorts last."""
        ordering = [*self.columns[self.key].order, (F("id"), True)]
        return [
            expression.asc(nulls_last=True) if ascending != self.descending else expression.desc(nulls_last=True)
            for expression, ascending in ordering
        ]

    def apply(self, jobs: QuerySet[Job]) -> QuerySet[Job]:
        return jobs.order_by(*self.order_by())

    def asks(self, key: str) -> str:
        """The `sort=` value a click on the header of column `key` asks for."""
        if key == self.key:
            return self.key if self.descending else f"-{self.key}"
        return f"-{key}" if self.columns[key].descending_first else key

    def aria(self, key: str) -> str | None:
        """The header's aria-sort: only the column sorted by has one."""
        if key != self.key:
            return None
        return "descending" if self.descending else "ascending"


# --- what the columns sort by ----------------------------------------------------------------------

PLACED = Coalesce("scheduled_at", "started_at")
# The GPUs a job asks: a slice its share of one GPU, else nodes x GPUs per node.
SIZE = Coalesce(F("gpu_fraction"), Cast(F("nodes") * F("gpus_per_node"), FloatField()))
# How long it has held (or held) its GPUs, as the Time column shows it (frontend.views._run_time); none for a queued job,
# nor for one that ended never having run (selectors.job_never_ran: its launches never came up).
NEVER_RAN = Q(started_at__isnull=True) & Q(launch_failures__gt=0)
RUN_TIME = Case(
    When(Q(state__in=ACTIVE_STATES) & Q(attempt__gt=0), then=Now() - PLACED),
    When(Q(state__in=TERMINAL_STATES) & Q(attempt__gt=0) & ~NEVER_RAN, then=F("finished_at") - PLACED),
    default=None,
    output_field=DurationField(),
)
# A job's life in order: waiting, starting, running, back from a preemption, then how it ended.
STATE_ORDER = Case(
    *(
        When(state=state, then=Value(i))
        for i, state in enumerate(
            [
                JobState.PENDING,
                JobState.SCHEDULED,
                JobState.RUNNING,
                JobState.PREEMPTED,
                JobState.SUCCEEDED,
                JobState.FAILED,
                JobState.TIMED_OUT,
                JobState.CANCELLED,
            ]
        )
    ),
    output_field=IntegerField(),
)
# The queue's expected start: a reservation's, else the plan's estimate.
EXPECTED_START = Coalesce("reserved_start", "estimated_start")


def class_rank() -> Case:
    """The priority class's place in MUSTER_PRIORITY_CLASSES (0 is the highest), read when a page sorts."""
    classes = settings.MUSTER_PRIORITY_CLASSES
    return Case(
        *(When(priority_class=name, then=Value(i)) for i, name in enumerate(classes)),
        default=Value(len(classes)),
        output_field=IntegerField(),
    )


def job_columns() -> tuple[Column, ...]:
    """The job list's sortable columns (its default: the newest first)."""
    return (
        Column("id", ((F("id"), True),)),
        Column("name", ((Lower("name"), True),)),
        Column("owner", ((F("owner__username"), True),)),
        Column("state", ((STATE_ORDER, True),)),
        Column("size", ((SIZE, True),), descending_first=True),
        Column("time", ((RUN_TIME, True),), descending_first=True),
        # A higher class before any lower one, then the stored priority (a queued job's).
        Column("priority", ((class_rank(), False), (F("priority"), True)), descending_first=True),
        Column("submitted", ((F("submitted_at"), True),), descending_first=True),
    )


JOB_LIST_DEFAULT = "-submitted"


def queue_columns() -> tuple[Column, ...]:
    """The cluster page's queue: by default in the order the last cycle planned it (scheduler.queue.queue_jobs)."""
    return (
        Column("position", ((F("queue_position"), True), (F("submitted_at"), True))),
        Column("id", ((F("id"), True),)),
        Column("owner", ((F("owner__username"), True),)),
        Column("size", ((SIZE, True),), descending_first=True),
        Column("class", ((class_rank(), False),), descending_first=True),
        Column("priority", ((F("priority"), True),), descending_first=True),
        Column("submitted", ((F("submitted_at"), True),), descending_first=True),
        Column("start", ((EXPECTED_START, True),)),
    )


QUEUE_DEFAULT = "position"
