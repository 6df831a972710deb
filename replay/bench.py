"""Time the replay of the Philly slice: `python -m replay.bench [trace] [--policies fifo,easy,muster] [--loads 1.0,0.85]`.

Pure (no Django). Prints one JSON line per (policy, load) and a final line with the total time. The
policy config is PolicyConfig() with max_jobs = 5000, the default of MUSTER_CYCLE_MAX_JOBS, which
scheduler.snapshot.policy_config passes to the real cycle; the other knobs are the settings' defaults.

Every job of the trace is replayed; the cluster is sized by the load offered from --load-from on
(2017-09-22 by default). The slice's first 18 days hold 46 of its 52,849 jobs: counting them in the
window that defines the offered load would size a cluster (47 nodes at load 1.0) that the remaining
39 days overload by half. Measured from Sep 22, load 1.0 is 66 nodes.
"""

from __future__ import annotations

import argparse
import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from policy.model import PolicyConfig
from replay.load import nodes_for_load, offered_load
from replay.metrics import summarize
from replay.overrides import OverrideError, apply_overrides
from replay.simulator import ClusterSpec, simulate
from replay.trace import RESUME_MODES, Assumptions, open_trace, read_trace

# In the repository (replay/traces/README.md says where it comes from), so `make replay` runs from a clean clone.
DEFAULT_TRACE = Path(__file__).resolve().parent / "traces" / "philly-2017-09-10.csv.gz"
CYCLE_MAX_JOBS = 5000  # config/settings.py MUSTER_CYCLE_MAX_JOBS default


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("trace", nargs="?", default=str(DEFAULT_TRACE))
    parser.add_argument("--policies", default="fifo,easy,muster")
    parser.add_argument("--loads", default="1.0,0.85")
    parser.add_argument("--load-from", default="2017-09-22", help="size the cluster by the load offered from this day (UTC); '' for all")
    parser.add_argument(
        "--tenant-quotas", action="store_true", help="quotas and borrowing: each tenant an equal-share max_gpus, every job preemptible"
    )
    parser.add_argument("--all-preemptible", action="store_true", help="every job preemptible (preemptible: true); no quotas")
    parser.add_argument(
        "--resume", choices=RESUME_MODES, default="restart",
        help="what a preempted job does: start again from zero, or resume from its last checkpoint (one an hour of run time)",
    )  # fmt: skip
    parser.add_argument(
        "--elastic-share", type=float, default=0.0,
        help="this share of the multi-node jobs (every second one for 0.5) is elastic: half to all of its nodes (docs/elastic-jobs.md)",
    )  # fmt: skip
    parser.add_argument(
        "--production-share", type=float, default=0.0,
        help="this share of the jobs (every tenth one for 0.1) is of the highest priority class and may stop the others' work",
    )  # fmt: skip
    parser.add_argument(
        "--waits-by-class", action="store_true",
        help="add waited_by_class: hours waited by shape (one_gpu, sub_node, whole_node, gang) and wall time, each one's part of the mean",
    )  # fmt: skip
    parser.add_argument("--from", dest="start", default="", help="replay only the jobs submitted from this day (UTC)")
    parser.add_argument("--days", type=float, default=0.0, help="with --from: that many days of submits")
    parser.add_argument(
        "--set", dest="overrides", action="append", default=[], metavar="KNOB=VALUE",
        help="change one of the policy's knobs (a PolicyConfig field, e.g. weight_short=2000); repeatable",
    )  # fmt: skip
    args = parser.parse_args(argv)
    began = time.perf_counter()
    try:
        assumptions = Assumptions(
            tenant_quotas=args.tenant_quotas,
            elastic_share=args.elastic_share,
            all_preemptible=args.all_preemptible,
            resume=args.resume,
            production_share=args.production_share,
        )
    except ValueError as exc:
        parser.error(str(exc))
    try:
        config = policy_config(args.overrides)
    except OverrideError as exc:
        parser.error(f"--set: {exc}")
    first = datetime.fromisoformat(args.start).replace(tzinfo=UTC) if args.start else None
    last = first + timedelta(days=args.days) if first and args.days else None
    jobs = read_trace(open_trace(args.trace), assumptions=assumptions, start=first, end=last)
    since = datetime.fromisoformat(args.load_from).replace(tzinfo=UTC).timestamp() if args.load_from else float("-inf")
    sizing = [j for j in jobs if j.submit >= since]
    for load in (float(x) for x in args.loads.split(",")):
        cluster = ClusterSpec(nodes=nodes_for_load(sizing, load, assumptions.gpus_per_node), gpus_per_node=assumptions.gpus_per_node)
        for policy in args.policies.split(","):
            start = time.perf_counter()
            result = simulate(jobs, cluster=cluster, policy=policy, config=config, assumptions=assumptions)
            s = summarize(result, config=config)
            line = {
                "policy": policy,
                "set": args.overrides,
                "load": load,
                "tenant_quotas": args.tenant_quotas,
                "all_preemptible": args.all_preemptible,
                "resume": args.resume,
                "elastic_share": args.elastic_share,
                "elastic_jobs": sum(1 for j in jobs if j.min_nodes),
                "production_share": args.production_share,
                # Over the whole trace's window, and over the window the cluster was sized by (--load-from).
                "offered_load": round(s["load"], 4),
                "offered_load_sized": round(offered_load(sizing, cluster.nodes * cluster.gpus_per_node), 4),
                "nodes": cluster.nodes,
                "jobs": s["jobs"],
                "mean_jct_s": round(s["jct"]["mean"], 1),
                "p99_wait_s": round(s["wait"]["p99"], 1),
                "gang_p99_wait_s": round(s["wait"]["split"]["gang"]["p99"], 1) if s["wait"]["split"]["gang"]["p99"] is not None else None,
                "utilisation": round(s["utilisation"], 4),
                "idle_while_waiting": round(s["idle_while_waiting"], 4),
                "min_tenant_share": round(s["fair_share"]["min_ratio"], 4) if s["fair_share"]["min_ratio"] is not None else None,
                "min_share_tenant_day": [s["fair_share"]["min_tenant"], s["fair_share"]["min_day"]],
                "min_tenant_share_window": round(w, 4) if (w := s["fair_share"]["window_min_ratio"]) is not None else None,
                "min_share_tenant_window": s["fair_share"]["window_min_tenant"],
                "preemptions": s["preemptions"],
                "reservation_slips": s["reservation_slips"]["count"],
                "mean_wait_s": round(s["wait"]["mean"], 1),
                "gpu_hours_lost": round(s["gpu_hours_lost"], 1),
                "gpu_hours_lost_share": round(s["gpu_hours_lost"] * 3600 / busy, 4) if (busy := s["gpu_seconds_held"]) else 0.0,
                "max_preemptions_per_job": max((r.preemptions for r in result.records), default=0),
                "eta_median_abs_s": s["eta"]["while_waiting"]["median_abs_seconds"],
                "eta_reserved_median_abs_s": s["eta"]["reserved"]["median_abs_seconds"],
                "policy_calls": s["decision_cpu"]["calls"],
                "policy_cpu_s": round(s["decision_cpu"]["total_seconds"], 1),
                "seconds": round(time.perf_counter() - start, 1),
            }
            if len(classes := s["wait"]["by_priority_class"]) > 1:
                line["by_priority_class"] = {
                    name: {
                        "jobs": c["jobs"],
                        "mean_wait_s": round(c["mean"], 1),
                        "p99_wait_s": round(c["p99"], 1),
                        "preemptions": c["preemptions"],
                    }
                    for name, c in classes.items()
                }
            if args.waits_by_class:
                line["waited_by_class"] = s["waited_by_class"]
            print(json.dumps(line), flush=True)
    print(json.dumps({"total_seconds": round(time.perf_counter() - began, 1)}), flush=True)


def policy_config(overrides: list[str]) -> PolicyConfig:
    """The cycle's PolicyConfig (max_jobs: MUSTER_CYCLE_MAX_JOBS's default) with each KNOB=VALUE applied; OverrideError
    says what was wrong."""
    config, _ = apply_overrides(PolicyConfig(max_jobs=CYCLE_MAX_JOBS), overrides)
    return config


if __name__ == "__main__":
    main()
