"""Replay a job trace on a simulated cluster under several policies and write the what-if report.

Everything is checked before anything runs: the trace (a bad row stops it, naming the line), the policies,
the --set changes to the site's policy settings, the cluster size. Then each policy is simulated in turn
(a progress bar with an ETA on stderr), and OUT gets summary.json and report.html (self-contained).
"""

from __future__ import annotations

from argparse import ArgumentTypeError
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from jobs.models import Node, NodeState
from replay.overrides import OverrideError, apply_overrides
from replay.report import headline_text, write_report
from replay.simulator import POLICIES
from replay.trace import Assumptions, TraceError, open_trace, read_trace
from scheduler.snapshot import policy_config
from whatif.management.commands.muster_history_export import parse_moment
from whatif.progress import ProgressBar
from whatif.runs import cluster_for, parse_policies, replay_policies, runtime_cap_check, settings_used


def _runtime_cap(value: str) -> float | None:
    """--runtime-cap: seconds above 0, or `none` for no cap (0 is refused, as the what-if page refuses it)."""
    if value.strip().lower() == "none":
        return None
    try:
        seconds = float(value)
    except ValueError:
        raise ArgumentTypeError(f"{value!r} is not a number of seconds (or `none` for no cap)") from None
    try:
        return runtime_cap_check(seconds, no_cap="Give `none` for no cap.")
    except ValueError as exc:
        raise ArgumentTypeError(str(exc)) from None


class Command(BaseCommand):
    help = "What-if replay: simulate a job trace under FIFO, EASY backfill and Muster's policy, and write a report."

    def add_arguments(self, parser: CommandParser) -> None:
        defaults = Assumptions()
        parser.add_argument("--trace", required=True, help="Philly CSV or Muster history CSV (muster_history_export), optionally .gz")
        parser.add_argument("--out", required=True, help="directory for summary.json and report.html")
        size = parser.add_mutually_exclusive_group()
        size.add_argument("--nodes", type=int, help="simulated cluster size in nodes (default: this site's node count)")
        size.add_argument("--load", type=float, help="size the cluster so the trace offers this load (0.9 = 90%% of its GPU time)")
        parser.add_argument("--gpus-per-node", type=int, default=defaults.gpus_per_node)
        parser.add_argument("--policies", default=",".join(POLICIES), help=f"comma-separated, from {', '.join(POLICIES)}")
        parser.add_argument(
            "--set", action="append", default=[], metavar="NAME=VALUE", help="change a policy setting (PolicyConfig field); repeatable"
        )
        parser.add_argument("--start", help="only jobs submitted from this date or ISO date-time")
        parser.add_argument("--end", help="only jobs submitted before this date or ISO date-time")
        parser.add_argument("--wall-round", type=float, default=defaults.wall_round_seconds, help="wall = runtime rounded up to S s")
        parser.add_argument(
            "--runtime-cap", type=_runtime_cap, default=defaults.runtime_cap_seconds, help="cut runtimes above S s (above 0; none: no cap)"
        )
        parser.add_argument("--resume", choices=("restart", "checkpoint"), default=defaults.resume, help="what a preempted job does")
        parser.add_argument(
            "--tenant-quotas", action="store_true", help="each tenant an equal-share GPU quota; every job may borrow beyond it"
        )
        parser.add_argument("--all-preemptible", action="store_true", help="every job preemptible, no quotas")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            policies = parse_policies(options["policies"])
            config, changes = apply_overrides(policy_config(), options["set"])
            assumptions = Assumptions(
                gpus_per_node=options["gpus_per_node"],
                wall_round_seconds=options["wall_round"],
                runtime_cap_seconds=options["runtime_cap"],
                resume=options["resume"],
                tenant_quotas=options["tenant_quotas"],
                all_preemptible=options["all_preemptible"],
            )
        except OverrideError as exc:
            raise CommandError(f"--set: {exc}") from None
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        start = parse_moment(options["start"], "--start") if options["start"] else None
        end = parse_moment(options["end"], "--end") if options["end"] else None
        path = Path(options["trace"])
        if not path.is_file():
            raise CommandError(f"--trace: no such file {path}")
        try:
            jobs = read_trace(open_trace(path), assumptions=assumptions, start=start, end=end)
        except TraceError as exc:
            raise CommandError(f"{path}: {exc}; nothing was run") from None
        except (OSError, UnicodeDecodeError, EOFError) as exc:
            raise CommandError(f"{path}: cannot read it: {exc}") from None
        if not jobs:
            raise CommandError(f"{path}: no jobs{' in that range' if start or end else ''}")
        nodes, load = options["nodes"], options["load"]
        if nodes is None and load is None:
            nodes = Node.objects.exclude(state=NodeState.GONE).count()
            if not nodes:
                raise CommandError("this site has no nodes to size the cluster from: give --nodes or --load")
        try:
            cluster = cluster_for(jobs, nodes=nodes, load=load, gpus_per_node=assumptions.gpus_per_node)
        except ValueError as exc:
            raise CommandError(str(exc)) from None

        self.stderr.write(
            f"{len(jobs)} jobs from {path.name} on {cluster.nodes} nodes x {cluster.gpus_per_node} GPUs; policies {', '.join(policies)}"
            + (f"; changed: {', '.join(f'{k}={v}' for k, v in changes.items())}" if changes else "")
        )
        bar = ProgressBar(lambda text: self.stderr.write(text, ending=""))
        summaries, results = replay_policies(
            jobs, policies=policies, cluster=cluster, config=config, assumptions=assumptions, progress=bar.update
        )
        bar.finish()
        used = settings_used(cluster, config, assumptions, load=load)
        if changes:
            used["changed"] = ", ".join(f"{k}={v}" for k, v in changes.items())
        summary_path, report_path = write_report(
            summaries, results, out_dir=Path(options["out"]), assumptions=assumptions, settings_used=used, trace_name=path.name
        )
        self.stdout.write(headline_text(summaries))
        self.stdout.write(f"\nwrote {summary_path} and {report_path}")
