"""Budget periods and decayed usage: pure time arithmetic, no database."""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

from django.conf import settings
from django.utils import timezone


def _zone() -> ZoneInfo:
    return ZoneInfo(settings.TIME_ZONE)


def _local_midnight(year: int, month: int, day: int) -> datetime:
    return datetime(year, month, day, tzinfo=_zone())


def period_bounds(at: datetime) -> tuple[datetime, datetime]:
    """The budget period holding `at`: [start, end), a calendar month or an ISO week, in settings.TIME_ZONE."""
    local = timezone.localtime(at, _zone())
    if settings.MUSTER_BUDGET_PERIOD == "week":
        monday = local.date() - timedelta(days=local.weekday())
        start = _local_midnight(monday.year, monday.month, monday.day)
        after = monday + timedelta(days=7)
        return start, _local_midnight(after.year, after.month, after.day)
    start = _local_midnight(local.year, local.month, 1)
    if local.month == 12:
        return start, _local_midnight(local.year + 1, 1, 1)
    return start, _local_midnight(local.year, local.month + 1, 1)


def period_words() -> str:
    """Which budget period is in force, as a quota form or page says it: "each calendar month (from the 1st, 00:00 UTC)"
    or "each week (from Monday, 00:00 UTC)", from MUSTER_BUDGET_PERIOD and MUSTER_TIME_ZONE. "Resets each period" said
    nothing of which."""
    if settings.MUSTER_BUDGET_PERIOD == "week":
        return f"each week (from Monday, 00:00 {settings.TIME_ZONE})"
    return f"each calendar month (from the 1st, 00:00 {settings.TIME_ZONE})"


def day_range(first: date, last: date) -> tuple[datetime, datetime]:
    """[midnight starting `first`, midnight ending `last`) in settings.TIME_ZONE: both days included."""
    after = last + timedelta(days=1)
    return _local_midnight(first.year, first.month, first.day), _local_midnight(after.year, after.month, after.day)


def local_today(now: datetime | None = None) -> date:
    return timezone.localtime(now or timezone.now(), _zone()).date()


def period_segments(start: datetime, end: datetime) -> Iterator[tuple[datetime, float]]:
    """Split [start, end) at period boundaries: (period start, seconds inside that period) for each piece."""
    at = start
    while at < end:
        period_start, period_end = period_bounds(at)
        piece_end = min(period_end, end)
        yield period_start, (piece_end - at).total_seconds()
        at = piece_end


def decayed_seconds(start: datetime, end: datetime, *, now: datetime, half_life: float) -> float:
    """∫ 2^(-(now - t) / half_life) dt over [start, end]: seconds held, each weighted by its age.

    Closed form: half_life / ln 2 x (2^(-(now - end) / h) - 2^(-(now - start) / h)).
    Times after `now` count as `now`.
    """
    end = min(end, now)
    start = min(start, end)
    age_end = (now - end).total_seconds()
    age_start = (now - start).total_seconds()
    return half_life / math.log(2) * (2 ** (-age_end / half_life) - 2 ** (-age_start / half_life))


def overlap_seconds(start: datetime, end: datetime, range_start: datetime, range_end: datetime) -> float:
    """Seconds of [start, end) inside [range_start, range_end); 0 when they do not meet."""
    return max(0.0, (min(end, range_end) - max(start, range_start)).total_seconds())
