"""Write this site's finished jobs as a replay trace (the Muster history CSV; `muster_replay --trace` reads it)."""

from __future__ import annotations

import sys
from datetime import datetime
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from whatif.history import history_write


def parse_moment(text: str, option: str) -> datetime:
    """An ISO date (midnight in the site's time zone) or date-time (without an offset: the site's time zone)."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise CommandError(f"{option}: {text!r} is not a date (YYYY-MM-DD) or an ISO date-time") from None
    return moment if timezone.is_aware(moment) else timezone.make_aware(moment)


class Command(BaseCommand):
    help = "Export finished jobs that ran (succeeded, failed, timed out, cancelled) as a trace CSV for muster_replay."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--out", required=True, help="the CSV file to write ('-' for standard output)")
        parser.add_argument("--start", help="first submit time to include (date or ISO date-time)")
        parser.add_argument("--end", help="submit times before this only (date or ISO date-time)")

    def handle(self, *args: Any, **options: Any) -> None:
        start = parse_moment(options["start"], "--start") if options["start"] else None
        end = parse_moment(options["end"], "--end") if options["end"] else None
        if start and end and end <= start:
            raise CommandError("--end must be after --start")
        if options["out"] == "-":
            count = history_write(sys.stdout, start, end)
        else:
            with open(options["out"], "w", encoding="utf-8", newline="") as stream:
                count = history_write(stream, start, end)
        self.stderr.write(f"{count} jobs written")
