"""Print the settings in force (Slurm's `scontrol show config`): every variable Muster reads, its value, and whether
the environment set it. Run it where Muster runs (`docker compose exec web ...`, `kubectl exec deploy/muster-web
...`): it reads its own process's environment, as the server did at its start. The admins' Settings page (/settings/)
shows the web server's own."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from config.effective_settings import effective_settings, unknown_variables


class Command(BaseCommand):
    help = "Show every setting Muster reads (docs/settings.md) with the value in force and where it came from."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--changed", action="store_true", help="Only the variables set in the environment.")
        parser.add_argument("--json", action="store_true", help="One JSON object: settings and unknown variables.")

    def handle(self, *args: Any, **options: Any) -> None:
        rows = [s for s in effective_settings() if s.from_environment or not options["changed"]]
        unknown = unknown_variables()
        if options["json"]:
            out = {
                "settings": [{"name": s.name, "value": s.value, "environment": s.environment} for s in rows],
                "unknown": unknown,
            }
            self.stdout.write(json.dumps(out, indent=2))
            return
        width = max((len(s.name) for s in rows), default=8)
        self.stdout.write(f"{'VARIABLE':<{width}}  FROM         VALUE IN FORCE")
        for s in rows:
            source = "environment" if s.from_environment else "default"
            # The environment's text beside the value when they read differently (a cap, a fallback, a bad value).
            said = f"  (set to {s.environment})" if s.from_environment and s.environment != s.value else ""
            self.stdout.write(f"{s.name:<{width}}  {source:<11}  {s.value}{said}")
        changed = sum(s.from_environment for s in rows)
        self.stdout.write(f"{len(rows)} settings, {changed} set in the environment; every one: docs/settings.md")
        if unknown:
            self.stderr.write(f"Set but not read by Muster (a misspelt name leaves its default in force): {', '.join(unknown)}.")
