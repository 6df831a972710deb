"""How the CLI shows the API's answers to a person: aligned tables and `key: value` lines, times in local time."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from datetime import date, datetime, timedelta, timezone
from typing import Any

from muster_client.client import TERMINAL_STATES
from muster_client.spec import format_duration, shares_gpu

JSON = dict[str, Any]

# What an estimated start means, in the words `squeue --start` readers expect.
ESTIMATE_PREFIX = {"reserved": "by ", "planned": "~", "after": "after "}


def plural(count: float, noun: str, many: str = "") -> str:
    """`1 slice`, `3 slices`, `0 slices`: the count with its noun, singular only for exactly one (`many` for an irregular
    plural), as the server's `policy.model.plural` says it (the client may not import it)."""
    return f"{count:g} {noun if count == 1 else many or noun + 's'}"


def parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    # Python 3.10's fromisoformat does not read a trailing Z.
    parsed = datetime.fromisoformat(value[:-1] + "+00:00" if value.endswith("Z") else value)
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)


def when(value: str | None, *, now: datetime | None = None) -> str:
    """A time in the local zone to the second: `14:05:09` today, `2026-11-26 14:05:09` another day, `-` for none."""
    moment = parse_time(value)
    if moment is None:
        return "-"
    local = moment.astimezone()
    today = (now or datetime.now(timezone.utc)).astimezone().date()
    return local.strftime("%H:%M:%S" if local.date() == today else "%Y-%m-%d %H:%M:%S")


def stamp(value: str | None) -> str:
    """A time in the local zone with its day, whatever the day: `2026-11-26 14:05:09` (sacct's), so a job's history
    lines up and reads across midnight."""
    moment = parse_time(value)
    return "-" if moment is None else moment.astimezone().strftime("%Y-%m-%d %H:%M:%S")


def until(value: str | None, *, now: datetime | None = None) -> str:
    """`in 12m`, `3m ago`, or `-`."""
    moment = parse_time(value)
    if moment is None:
        return "-"
    seconds = (moment - (now or datetime.now(timezone.utc))).total_seconds()
    return f"in {format_duration(seconds)}" if seconds >= 0 else f"{format_duration(-seconds)} ago"


def expected_start(entry: JSON) -> str:
    if not entry.get("estimated_start"):
        return "unknown"
    return f"{ESTIMATE_PREFIX.get(entry.get('estimate_kind') or '', '')}{when(entry['estimated_start'])}"


def cut(value: Any, width: int) -> str:
    text = "" if value is None else str(value)
    return text if len(text) <= width else text[: width - 1] + "…"


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """Columns as wide as their widest cell, two spaces apart, like squeue's."""
    cells = [[str(h) for h in headers], *[["-" if c is None else str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    return "\n".join("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in cells)


def shape(job: JSON) -> str:
    """Nodes x GPUs per node as sbatch's -N and --gpus-per-node: `2x8`, an elastic range `2-4x8` (running on 3 of it:
    `3(2-4)x8`), a GPU slice `1x0.25` (holding a MIG slice of 1/7 of a GPU for it: `1x0.143(0.1)`, what it holds
    first as for an elastic job, which is what usage and quotas count). A multi-node job asking part of each node holds
    its nodes whole: `2x8(4)`, 8 held on each for an ask of 4."""
    if shares_gpu(job):
        if job.get("gpu_fraction"):
            asked = f"{job['gpu_fraction']:g}"
        else:
            asked = f"{job['gpu_memory_gb']:g}GB" if job.get("gpu_memory_gb") else "MIG"
        held = job.get("gpus_held")
        return f"1x{held:g}({asked})" if held and f"{held:g}" != asked else f"1x{asked}"
    nodes = f"{job['min_nodes']}-{job['max_nodes']}" if job.get("min_nodes") and job.get("max_nodes") else job["nodes"]
    if job.get("min_nodes") and job.get("state") in ("SCHEDULED", "RUNNING"):
        nodes = f"{job['nodes']}({nodes})"  # an elastic job on its nodes now: `3(2-4)x8`
    per_node = _held_per_node(job)
    if per_node is not None:
        return f"{nodes}x{per_node:g}({job['gpus_per_node']})"
    return f"{nodes}x{job['gpus_per_node']}"


def _held_per_node(job: JSON) -> float | None:
    """The GPUs a whole-GPU job holds on each node when that is not its ask (a gang holds its nodes whole, and usage
    counts what it holds), else None."""
    held, nodes = job.get("gpus_held"), job.get("nodes") or 0
    if not held or not nodes or held == nodes * job["gpus_per_node"] or held % nodes:
        return None
    return float(held / nodes)


def gpus(job: JSON) -> str:
    """What the job holds in whole GPUs, or the slice it asks for."""
    if shares_gpu(job):
        asks = [
            f"{job['gpu_fraction']:g} of a GPU" if job.get("gpu_fraction") else "",
            f"{job['gpu_memory_gb']:g} GB of GPU memory" if job.get("gpu_memory_gb") else "",
            "isolated (MIG)" if job.get("gpu_isolation") else "",
        ]
        held = f"; holds {job['gpus_held']:g} of a GPU now" if job.get("gpus_held") else ""
        return "a GPU slice: " + ", ".join(a for a in asks if a) + held
    whole = job.get("gpus_held")
    if whole and whole != job["nodes"] * job["gpus_per_node"]:
        # `2x4 (8 GPUs)` read as what it is charged for, while it held (and usage counted) 16: its nodes whole.
        asked = job["nodes"] * job["gpus_per_node"]
        return f"holds {plural(whole, 'GPU')}, its {plural(job['nodes'], 'node')} whole, as usage counts them; asked {asked}"
    if job.get("min_nodes") and job.get("max_nodes"):
        if job["state"] in ("SCHEDULED", "RUNNING"):
            return f"{plural(job['gpus'], 'GPU')} on {plural(job['nodes'], 'node')} now"
        return f"{job['min_nodes'] * job['gpus_per_node']} to {job['max_nodes'] * job['gpus_per_node']} GPUs"
    return f"{job['gpus']} GPU{'' if job['gpus'] == 1 else 's'}"


def reason(job: JSON) -> str:
    pending = job.get("pending_reason") or {}
    return str(pending.get("code") or pending.get("message") or "-")


# `muster queue`'s words for the states of jobs on their nodes.
ACTIVE_WORDS = {"SCHEDULED": "starting", "RUNNING": "running"}

# A job on its nodes borrowing beyond its quota is marked in the STATE column (`RUNNING+`, as `+8` in `muster usage`
# is what is borrowed), with this line under the table: the API said `over_quota`, the CLI nothing.
BORROWING_MARK = "+"
BORROWING_LEGEND = (
    f"{BORROWING_MARK} borrowing: holds GPUs beyond its quota (a preemptible job on idle GPUs), so it is preempted first "
    "when the quota's own jobs need them"
)

BORROWING_SHOWN = "yes: it holds GPUs beyond its quota, so it is preempted first when the quota's own jobs need them"


def borrowing(job: JSON) -> bool:
    """On its nodes beyond its owner's (or team's) quota: the first to be preempted."""
    return bool(job.get("over_quota")) and job.get("state") in ACTIVE_WORDS


def state_cell(job: JSON) -> str:
    """Its state, `RUNNING+` while it borrows beyond its quota."""
    return str(job["state"]) + (BORROWING_MARK if borrowing(job) else "")


def above_quota_line(accounts: Sequence[JSON]) -> str:
    """The queue summary's `accounts_above_quota` in the cluster page's words; "" for none."""
    if not accounts:
        return ""
    held = "; ".join(f"{a['kind']} {a['name']} holds {plural(a['gpus'], 'GPU')} of its quota of {a['max_gpus']}" for a in accounts)
    return f"Above a quota lowered under their running jobs (not stopped; nothing new of theirs starts until under it): {held}."


def hostlist(names: Sequence[str]) -> str:
    """Node names as squeue's NODELIST: numbered names of one prefix as ranges, `sim-node-[000-003,007]`."""
    groups: dict[tuple[str, int], list[int]] = {}
    others: list[str] = []
    for name in names:
        match = re.fullmatch(r"(.*?)(\d+)", name)
        if match:
            groups.setdefault((match.group(1), len(match.group(2))), []).append(int(match.group(2)))
        else:
            others.append(name)
    parts = []
    for (prefix, width), numbers in groups.items():
        numbers = sorted(set(numbers))
        if len(numbers) == 1:
            parts.append(f"{prefix}{numbers[0]:0{width}d}")
            continue
        spans: list[list[int]] = []
        for n in numbers:
            if spans and n == spans[-1][1] + 1:
                spans[-1][1] = n
            else:
                spans.append([n, n])
        ranges = ",".join(f"{a:0{width}d}" if a == b else f"{a:0{width}d}-{b:0{width}d}" for a, b in spans)
        parts.append(f"{prefix}[{ranges}]")
    return ",".join(parts + others) or "-"


# The most names one node list may stand for: `gpu-[0-99999999]` is a slip, not a hundred million nodes.
HOSTLIST_MAX_NAMES = 10_000


def hostlist_names(text: str) -> list[str]:
    """The node names of a list as `hostlist` and squeue's NODELIST write it, as scontrol takes NodeName=:
    `gpu-[00-02,04],cpu-1` is gpu-00, gpu-01, gpu-02, gpu-04 and cpu-1 (a range keeps its first number's width).
    A node's own name has no brackets (Kubernetes names are DNS names). Raises ValueError naming what is wrong."""
    names: list[str] = []
    name = r"(?:[^,\[\]]|\[[^\[\]]*\])+"
    if re.fullmatch(rf"{name}(?:,{name})*", text) is None:
        raise ValueError(f"'{text}' is not a node list: write gpu-07, or gpu-[00-03,07] (numbers and ranges in one pair of brackets)")
    # Commas inside brackets separate numbers, outside them names.
    for part in re.findall(name, text):
        match = re.fullmatch(r"([^\[\]]*)\[([^\]]*)\]([^\[\]]*)", part)
        if match is None:
            if "[" in part:
                raise ValueError(f"'{part}' is not a node list: write gpu-[00-03,07] (numbers and ranges in one pair of brackets)")
            names.append(part)
            continue
        prefix, inside, suffix = match.groups()
        for span in inside.split(","):
            bounds = re.fullmatch(r"([0-9]+)(?:-([0-9]+))?", span.strip())
            if bounds is None or (bounds.group(2) is not None and int(bounds.group(2)) < int(bounds.group(1))):
                raise ValueError(f"'{part}': '{span}' is not a number or a rising range (write gpu-[00-03,07])")
            first, last = int(bounds.group(1)), int(bounds.group(2) or bounds.group(1))
            if len(names) + last - first + 1 > HOSTLIST_MAX_NAMES:
                raise ValueError(f"'{text}' names more than {HOSTLIST_MAX_NAMES:,} nodes")
            width = len(bounds.group(1))
            names += [f"{prefix}{n:0{width}d}{suffix}" for n in range(first, last + 1)]
    return list(dict.fromkeys(name for name in names if name))


def time_left(job: JSON, *, now: datetime | None = None) -> str:
    """What is left of its wall time, which counts from its placement (squeue's TIME_LEFT); `0s` once it is spent."""
    placed = parse_time(job.get("scheduled_at")) or parse_time(job.get("started_at"))
    if placed is None:
        return format_duration(job.get("wall_time_seconds"))
    spent = ((now or datetime.now(timezone.utc)) - placed).total_seconds()
    return format_duration(max(0.0, job["wall_time_seconds"] - spent))


def queue_table(
    queue: JSON,
    running: Sequence[JSON] = (),
    *,
    states: Sequence[str] = ("PENDING", "SCHEDULED", "RUNNING"),
    filtered: bool = False,
    limited: bool = False,
    visible: int | None = None,
    now: datetime | None = None,
) -> str:
    """`squeue`: the queue API's pending entries, then `running` (jobs SCHEDULED or RUNNING); `states` those asked for.

    `filtered`: the rows are one user's (--user), some jobs' (-j) or names' (-n); `limited`: cut to --limit. Either way the last line
    says how many are shown and what the whole queue has, as it would without them; `visible`: how many jobs on their
    nodes the user may see (fewer than the cluster has: said)."""
    rows = [
        (
            e["id"],
            cut(e["name"], 24),
            e["owner"],
            "PENDING",
            shape(e),
            e["position"] if e["position"] is not None else "new",
            # To one decimal, as `muster show`, `muster why` and every page say it: 8003 here read as another priority
            # than the 8002.8 those gave the same job.
            f"{e['priority']['total']:.1f}" if e.get("priority") else "-",
            "-",
            "-",
            expected_start(e),
            f"({cut(reason(e), 24)})",
        )
        for e in queue["results"]
    ]
    rows += [
        (
            j["id"],
            cut(j["name"], 24),
            j["owner"],
            state_cell(j),
            shape(j),
            "-",
            "-",
            elapsed(j, now=now),
            time_left(j, now=now),
            when(j.get("scheduled_at") or j.get("started_at"), now=now),
            hostlist(j.get("assigned_nodes") or []),
        )
        for j in running
    ]
    headers = ["ID", "NAME", "USER", "STATE", "NODESxGPUS", "POS", "PRIORITY", "TIME", "TIME_LEFT", "START", "NODELIST(REASON)"]
    listed = [*queue["results"], *running]
    if any(j.get("array_id") is not None for j in listed):
        # An array's elements as squeue names them, `5_0` (array 5, index 0), beside the id `muster show` takes; the
        # column only when the queue shows an element. (The queue API's pending entries do not say it yet: `-` for those.)
        headers.insert(1, "ARRAY")
        text = table(headers, [(row[0], array_element(job), *row[1:]) for row, job in zip(rows, listed, strict=True)])
    else:
        text = table(headers, rows)
    summary = queue.get("summary") or {}
    by_reason = ", ".join(f"{code} {n}" for code, n in sorted((summary.get("pending_by_reason") or {}).items()))
    pending = f"{summary.get('pending', queue.get('count', len(queue['results'])))} pending" + (f" ({by_reason})" if by_reason else "")
    # Every job on its nodes, whoever's: the queue API counts them within and over their owners' quotas.
    on_nodes = None
    if "running_within_quota" in summary:
        on_nodes = summary["running_within_quota"] + summary.get("running_over_quota", 0)
    active = [state for state in ("RUNNING", "SCHEDULED") if state in states]
    hidden = " (others' jobs on their nodes are listed to their owners and admins only)"
    over = summary.get("running_over_quota") or 0
    # The cluster's jobs beyond their quotas, whoever's, as the cluster page counts them.
    held = f"{plural(summary['gpus_over_quota'], 'GPU')}, " if summary.get("gpus_over_quota") else ""
    lent = f"{over} borrowing beyond quota ({held}preempted first)" if over else ""
    if filtered or limited:  # else "1 pending" under an empty table read as that user's, and -n 3's "1 running" as all
        whole = [pending] if "PENDING" in states else []
        if active and on_nodes is not None:
            whole.append(f"{on_nodes} running or starting" + (hidden if visible is not None and visible < on_nodes else ""))
            whole += [lent] if lent else []
        last = f"{len(rows)} shown" + (f"; in the whole queue {', '.join(whole)}" if whole else "")
    else:
        parts = [pending] if "PENDING" in states else []
        if active:
            shown = ", ".join(f"{sum(1 for j in running if j['state'] == state)} {ACTIVE_WORDS[state]}" for state in active)
            if len(active) == 2 and on_nodes is not None and len(running) < on_nodes:
                shown += f" (of {on_nodes} on the cluster: others' jobs are listed to their owners and admins only)"
            parts.append(shown)
            parts += [lent] if lent else []
        last = "; ".join(parts)
    notes = [BORROWING_LEGEND] if any(borrowing(j) for j in running) else []
    notes += [line] if (line := above_quota_line(summary.get("accounts_above_quota") or ())) else []
    return "\n".join([text, last, *notes])


def array_element(job: JSON) -> str | None:
    """`5_0` for element 0 of array 5 (squeue's and scancel's name of it); None for a job of no array."""
    return None if job.get("array_id") is None else f"{job['array_id']}_{job['array_index']}"


def index_ranges(indices: Iterable[int]) -> str:
    """Array indices as sbatch --array writes them: `0-3,7`."""
    spans: list[list[int]] = []
    for n in sorted(set(indices)):
        if spans and n == spans[-1][1] + 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)


def _elements(array_id: int, jobs: Sequence[JSON]) -> str:
    """`4_7` for one element, `4_[1-3,8]` for several: scancel's names."""
    indices = [job["array_index"] for job in jobs]
    return f"{array_id}_{indices[0]}" if len(indices) == 1 else f"{array_id}_[{index_ranges(indices)}]"


def job_cancelled(job: JSON) -> str:
    """`Cancelled job 12 (train)`; an array's element as scancel names it too: `Cancelled job 5 (sweep): 3_2`."""
    element = f": {_elements(job['array_id'], [job])}" if job.get("array_id") is not None else ""
    return f"Cancelled job {job['id']} ({job['name']}){element}"


def array_cancelled(result: JSON, *, whole: bool) -> str:
    """`muster cancel 4` / `4_7`: what was cancelled of an array (Client.cancel_array's answer; some was)."""
    array_id, done = result["array_id"], result["cancelled"]
    if not whole and len(done) == 1:
        return f"Cancelled job {done[0]['id']} ({done[0]['name']}): {_elements(array_id, done)}"
    jobs = f"{len(done)} job{'s' if len(done) != 1 else ''}"
    if not whole:
        return f"Cancelled {jobs} of array {array_id} ({result['name']}): {_elements(array_id, done)}"
    ended = f"; {len(result['ended'])} had already ended" if result["ended"] else ""
    return f"Cancelled array {array_id} ({result['name']}): {jobs} ({_elements(array_id, done)}){ended}"


def array_not_cancelled(result: JSON, *, whole: bool, asked: int = 0) -> list[str]:
    """What `muster cancel` of an array could not do, one line each: nothing left to cancel, indices it lacks (of the
    `asked` indices: when others were asked too, they were not cancelled either, as the server cancels all or none)."""
    array_id, ended, problems = result["array_id"], result["ended"], []
    nothing = "there is nothing to cancel"
    if whole and not result["cancelled"] and ended:
        jobs = f"{len(ended)} job{'s' if len(ended) != 1 else ''}"
        problems.append(f"array {array_id} has ended: its {jobs} had already ended; {nothing}.")
    elif not whole and len(ended) == 1:
        job = ended[0]
        problems.append(f"job {job['id']} ({_elements(array_id, ended)}) has already ended ({job['state']}); {nothing}.")
    elif not whole and ended:
        problems.append(f"{len(ended)} elements of array {array_id} ({_elements(array_id, ended)}) had already ended; {nothing} in them.")
    if result.get("missing"):
        missing = result["missing"]
        which = f"element {missing[0]}" if len(missing) == 1 else f"elements {index_ranges(missing)}"
        others = "; nothing was cancelled" if asked > len(missing) else ""
        problems.append(f"array {array_id} has no {which} (its elements and their indices: muster jobs --array {array_id}){others}.")
    return problems


def never_started(job: JSON) -> bool:
    """An ended job the server gives no run time: it never ran (ended while queued, or its launches never came up)."""
    return job.get("state") in TERMINAL_STATES and "run_seconds" in job and job["run_seconds"] is None


def elapsed(job: JSON, *, now: datetime | None = None) -> str:
    """How long it has held its GPUs: from its placement, as its wall time counts (and the job page shows), not from
    when its containers came up, which may be minutes later on a cluster that pulls images."""
    if job.get("state") == "PENDING":
        return "-"  # back in the queue (requeued, or a launch that failed), it holds nothing: its last placement is past
    if never_started(job):
        return "-"  # not its placement until the cancel: its failed launches held GPUs a moment, its code never ran
    if job.get("run_seconds") is not None:
        # The server's count: a job cancelled back in the queue ran until its requeue, not until the cancel.
        return format_duration(float(job["run_seconds"]))
    placed = parse_time(job.get("scheduled_at")) or parse_time(job.get("started_at"))
    if placed is None:
        return "-"  # never placed (or a server that does not say run_seconds)
    end = parse_time(job.get("finished_at")) or now or datetime.now(timezone.utc)
    return format_duration(max(0.0, (end - placed).total_seconds()))


def jobs_table(jobs: Sequence[JSON], *, header: bool = True) -> str:
    """`sacct`: one row a job; without `header` (sacct -n) the rows alone, for a script to read."""
    rows = [
        (
            j["id"],
            cut(j["name"], 28),
            j["owner"],
            state_cell(j),
            shape(j),
            when(j["submitted_at"]),
            elapsed(j),
            j.get("exit_code"),
            array_element(j),  # `21_3`, as the queue, squeue and scancel name an element
        )
        for j in jobs
    ]
    text = table(["ID", "NAME", "USER", "STATE", "NODESxGPUS", "SUBMITTED", "ELAPSED", "EXIT", "ARRAY"], rows)
    if not header:
        # The columns as wide as with the header, which is then dropped.
        return "\n".join(text.splitlines()[1:])
    if not rows:
        return f"{text}\n0 jobs"  # a header alone read as a failure to list, as `muster queue` says "0 pending"
    return "\n".join([text, BORROWING_LEGEND]) if any(borrowing(j) for j in jobs) else text


def job_lines(job: JSON) -> list[str]:
    """`scontrol show job`: one `key: value` per line."""
    fields: list[tuple[str, Any]] = [
        ("id", job["id"]),
        ("name", job["name"]),
        ("owner", job["owner"] + (f" (team {job['team']})" if job.get("team") else "")),
        ("state", job["state"] + (f": {job['state_reason']}" if job.get("state_reason") else "")),
    ]
    if job["state"] == "PENDING":
        fields += [
            ("reason", (job.get("pending_reason") or {}).get("message") or "-"),
            ("position", job.get("queue_position") if job.get("queue_position") is not None else "not planned yet"),
            ("priority", f"{job['priority']['total']:.1f}" if job.get("priority") else "-"),
            ("expected start", expected_start(job)),
        ]
    fields += [
        ("image", job["image"]),
        ("command", " ".join(job["command"])),
        ("nodes x gpus", f"{shape(job)} ({gpus(job)})"),
        ("wall time", format_duration(job["wall_time_seconds"])),
        ("priority class", job["priority_class"] + (" (preemptible)" if job.get("preemptible") else "")),
        *([("borrowing", BORROWING_SHOWN)] if borrowing(job) else []),
        ("attempt", f"{job['attempt']} (restarts {job['restarts']} of {job['max_restarts']})"),
        ("exit code", job.get("exit_code")),
        ("nodes", hostlist(job.get("assigned_nodes") or []) or "-"),  # scontrol show job's NodeList=gpu-[07-08]
        ("submitted", when(job.get("submitted_at"))),
        ("placed", when(job.get("scheduled_at"))),
        ("started", when(job.get("started_at"))),
        ("finished", when(job.get("finished_at"))),
        ("elapsed", "never started" if never_started(job) else elapsed(job)),
    ]
    if job.get("checkpointed_at"):
        step = f", step {job['checkpoint_step']}" if job.get("checkpoint_step") is not None else ""
        fields.append(("checkpoint", f"{when(job['checkpointed_at'])}{step} (attempt {job.get('checkpoint_attempt')})"))
    if job.get("array_id") is not None:
        fields.append(("array", f"{job['array_id']} index {job['array_index']}"))
    if job.get("dependencies"):
        fields.append(("dependencies", dependencies_line(job["dependencies"])))
    if job.get("env"):
        fields.append(("env", " ".join(f"{k}={v}" for k, v in sorted(job["env"].items()))))
    if job.get("attempts"):
        fields.append(("logs", "; ".join(f"attempt {a['attempt']}: ranks {_ranks(a['ranks'])}" for a in job["attempts"])))
    lines = [f"{key:<15} {'-' if value is None else value}" for key, value in fields]
    if job.get("events"):
        lines.append("history")
        lines += [
            f"  {stamp(e['at'])}  {e['from_state'] or '-':>9} -> {e['to_state']:<9}  {e.get('reason') or ''}".rstrip()
            for e in job["events"]
        ]
    if job.get("resizes"):
        # An elastic job's growths and shrinks, beside its state changes: its size changed with no state change.
        lines.append("resizes")
        # Each in its attempt: after a requeue the earlier attempt's resizes would read as the job's size now.
        for r in job["resizes"]:
            size = f"{r['from_nodes']:>3} -> {r['to_nodes']:<3} nodes"
            lines.append(f"  {stamp(r['at'])}  attempt {r.get('attempt', '?')}  {size}  {r.get('reason') or ''}".rstrip())
    return lines


def dependencies_line(dependencies: Sequence[JSON]) -> str:
    """What a job waits for as sbatch --dependency writes it, with where each stands: met, never (the job is then
    cancelled), or its state. An array's elements of one type together, as Slurm names them: `afterok:12_[0-99] (97
    met, 2 RUNNING, 1 PENDING)`, not a hundred entries."""
    said = {True: "met", False: "never met"}
    groups: dict[tuple[str, object], list[JSON]] = {}
    for d in dependencies:
        key = (d["type"], ("array", d["array_id"]) if d.get("array_id") is not None else d["job"])
        groups.setdefault(key, []).append(d)
    parts = []
    for (kind, _), deps in groups.items():
        first = deps[0]
        if len(deps) == 1:
            named = array_element(first) or str(first["job"])
            parts.append(f"{kind}:{named} ({said.get(first['met'], first['state'])})")
            continue
        stands: dict[str, int] = {}
        for d in deps:
            stand = str(said.get(d["met"], d["state"]))
            stands[stand] = stands.get(stand, 0) + 1
        counted = ", ".join(f"{n} {stand}" for stand, n in sorted(stands.items(), key=lambda c: (-c[1], c[0])))
        parts.append(f"{kind}:{first['array_id']}_[{index_ranges(d['array_index'] for d in deps)}] ({counted})")
    return ", ".join(parts)


def _ranks(ranks: Sequence[int]) -> str:
    return (
        f"{ranks[0]}-{ranks[-1]}" if len(ranks) > 1 and list(ranks) == list(range(ranks[0], ranks[-1] + 1)) else ",".join(map(str, ranks))
    )


def why_lines(job: JSON) -> list[str]:
    """`sprio` and squeue's reason for one job: why it waits, where it stands, what its priority is made of."""
    head = f"Job {job['id']} ({job['name']}) is {job['state']}"
    if job["state"] in ("SCHEDULED", "RUNNING"):
        nodes = hostlist(job.get("assigned_nodes") or []) or "its nodes"
        # Since its placement, as `muster queue`'s START and TIME and its wall time count (its GPUs are its from then);
        # when its pods came up beside it. It read "since" the pods' start, two seconds after the START the queue showed.
        placed = job.get("scheduled_at") or job.get("started_at")
        up = "its pods starting"
        if job["state"] == "RUNNING":
            up = f"its pods running since {when(job['started_at'])}" if job.get("started_at") else "its pods running"
        return [f"{head} on {nodes} since {when(placed)} (placed; {up}): not waiting."]
    if job["state"] != "PENDING":
        return [head + (f": {job['state_reason']}" if job.get("state_reason") else ".")]
    pending = job.get("pending_reason") or {}
    message = pending.get("message") or "not yet considered by a scheduling cycle"
    lines = [f"{head}: {message}" + (f" [{pending['code']}]" if pending.get("code") else "")]
    position = job.get("queue_position")
    if position is not None:
        lines.append(f"Position {position} in the queue.")
    else:
        lines.append("Not planned yet: the next scheduling cycle places it in the queue.")
    start = expected_start(job)
    if job.get("estimated_start"):
        start += f" ({until(job['estimated_start'])}; {job['estimate_kind']})"
    lines.append(f"Expected start: {start}")
    priority = job.get("priority")
    if priority:
        lines.append(f"Priority {priority['total']:.1f} (highest runs first), the sum of:")
        factors = sorted(priority["factors"].items(), key=lambda item: -item[1]["weighted"])
        rows = [(name, f"{f['value']:.4f}", f"{f['weighted']:.1f}") for name, f in factors]
        lines += ["  " + row for row in table(["FACTOR", "VALUE", "WEIGHTED"], rows).splitlines()]
    return lines


def progress_line(job: JSON, *, now: datetime | None = None) -> str:
    """One line for `muster wait`: state, place in the queue and ETA while pending; elapsed against the wall time once running."""
    text = f"job {job['id']} {job['state']}"
    if job["state"] == "PENDING":
        position = job.get("queue_position")
        text += f"  position {position if position is not None else 'new'}  reason {reason(job)}"
        if job.get("estimated_start"):
            text += f"  ETA {expected_start(job)} ({until(job['estimated_start'], now=now)})"
    elif job["state"] in ("SCHEDULED", "RUNNING"):
        if job["state"] == "RUNNING":
            text += f"  {elapsed(job, now=now)} of {format_duration(job['wall_time_seconds'])}"
        nodes = job.get("assigned_nodes") or []
        if nodes:
            text += f"  on {nodes[0]}" + (f" +{len(nodes) - 1}" if len(nodes) > 1 else "")
    if job.get("attempt", 0) > 1:
        text += f"  attempt {job['attempt']}"
    return text


def _limit(value: Any, unit: str = "") -> str:
    return "unlimited" if value is None else f"{value:g}{unit}" if isinstance(value, float) else f"{value}{unit}"


def _gpus_now(account: JSON) -> str:
    """`32/40+8`: the GPUs held within the quota against it, and those borrowed beyond it by preemptible jobs, as the
    quota pages say them; "40/40" read as full while 8 of the 40 were borrowed."""
    usage = account["usage"]
    if "gpus_within_quota" not in usage:  # a server before the split
        return f"{usage['gpus_in_use']}/{_limit(account['max_gpus'])}"
    borrowed = usage.get("gpus_borrowed") or 0
    return f"{usage['gpus_within_quota']}/{_limit(account['max_gpus'])}" + (f"+{borrowed}" if borrowed else "")


# The server's rule for stating node-hours (policy.budget: node_hours_places, node_hours_said), copied here as the
# client may not import the server; a test holds the two to the same figures.
NODE_HOURS_FINEST_PLACES = 6


def node_hours_places(*figures: float) -> int:
    """The places to state node-hour figures side by side: one, and more while a figure under one would show fewer than
    two significant figures (0.27, 0.011, 0.0042), to six at most."""
    places = 1
    for figure in figures:
        size = abs(figure)
        if 0.5 * 10**-NODE_HOURS_FINEST_PLACES <= size < 1:
            places = max(places, min(NODE_HOURS_FINEST_PLACES, 1 - math.floor(math.log10(size))))
    return places


def node_hours_columns(used: float, budget: float | None, committed: float | None) -> tuple[str, str, str]:
    """USED, LEFT and COMMITTED of one account as the Usage page states them: to the same places, used and left adding
    up to the budget as written, a use that is not nothing never 0.0 (`0.011` and `2.989` of 3, where USED read 0.01 and
    the page 0.0). `budget` is the period's (the quota's and what admins added), None without one."""
    finest = 10.0**-NODE_HOURS_FINEST_PLACES
    used = max(used, finest) if used > 0 else 0.0
    if budget is None:
        places = node_hours_places(used)
        return f"{used:.{places}f}", "-", "-"
    left = max(0.0, budget - used)
    held = committed or 0.0
    places = node_hours_places(used, left, held, max(0.0, left - held))
    places = max(places, next((p for p in range(3) if abs(round(budget, p) - budget) < 1e-9), 3))
    if used <= budget:
        used = budget - round(left, places)
    # What running jobs may still use of what is left (a server before it sent none: unknown).
    return f"{max(used, 0.0):.{places}f}", f"{round(left, places):.{places}f}", "-" if committed is None else f"{held:.{places}f}"


def _period_budget(account: JSON) -> float | None:
    """The period's budget, the quota's and what admins added to this period (None without one)."""
    base = account["node_hours_per_period"]
    return None if base is None else base + (account["usage"].get("node_hours_granted") or 0)


def budget_period(start: str, end: str) -> str:
    """The budget period as the Usage page says it: `1 Nov 2026 to 30 Nov 2026 (resets 1 Dec 2026 00:00 UTC)`, in the
    server's zone (the one its periods are counted in), the end exclusive: midnight of the next period is not its last
    day. It printed `2026-11-01 00:00:00 to 2026-12-01 00:00:00`."""
    first, renews = parse_time(start), parse_time(end)
    if first is None or renews is None:
        return f"{when(start)} to {when(end)}"
    last = (renews - timedelta(microseconds=1)).date()
    offset = renews.utcoffset() or timedelta(0)
    zone = "UTC" if not offset else f"UTC{renews.strftime('%z')[:3]}:{renews.strftime('%z')[3:]}"

    def day(d: date) -> str:
        return f"{d.day} {d:%b %Y}"

    return f"{day(first.date())} to {day(last)} (resets {day(renews.date())} {renews:%H:%M} {zone})"


def usage_text(summary: JSON) -> str:
    accounts = [summary["user"], *summary.get("teams", [])]
    head = f"Budget period {budget_period(summary['period_start'], summary['period_end'])}"
    return "\n".join([head, *_usage_table(accounts)])


def usage_all_text(users: list[JSON], teams: list[JSON]) -> str:
    """`muster usage --all` (admins): every account's row as its own `muster usage` states it, users then teams."""
    accounts = [*users, *teams]
    if not accounts:
        return "No accounts."
    usage = accounts[0]["usage"]
    head = f"Budget period {budget_period(usage['period_start'], usage['period_end'])}"
    return "\n".join([head, *_usage_table(accounts)])


def _usage_table(accounts: list[JSON]) -> list[str]:
    """The accounts' table and, after it, a line for each one above its GPU quota."""
    rows = []
    for a in accounts:
        used, left, committed = node_hours_columns(a["usage"]["node_hours_used"], _period_budget(a), a["usage"].get("node_hours_committed"))
        wall = "unlimited" if a["max_wall_time_seconds"] is None else format_duration(a["max_wall_time_seconds"])
        rows.append(
            (
                f"{a['account']} {a['name']}",
                _gpus_now(a),
                used,
                _budget(a),
                left,
                committed,
                f"{a['usage']['gpu_hours_used']:.2f}",
                wall,
                _limit(a["max_node_hours_per_job"]),
            )
        )
    headers = ["ACCOUNT", "GPUS NOW/MAX(+BORROWED)", "NODE-H USED", "NODE-H BUDGET", "LEFT", "COMMITTED", "GPU-H USED"]
    headers += ["MAX WALL", "MAX NODE-H/JOB"]
    # `64/16` read as a mistake: a quota lowered under running jobs, which are not stopped; said as the usage page says it.
    above = [
        f"{a['account']} {a['name']} is above its GPU quota: it holds {plural(a['usage']['gpus_within_quota'], 'GPU')} of "
        f"{a['max_gpus']} (the quota was lowered under its running jobs: they are not stopped, and no new job of it starts "
        "until it is under)."
        for a in accounts
        if _above_quota(a)
    ]
    return [table(headers, rows), *above]


def _budget(account: JSON) -> str:
    """The period's budget as the quota gives it, with what an admin added to this period only beside it: `30+10`, so
    LEFT (which counts both) adds up; it read `30` beside 40 node-hours left."""
    granted = account["usage"].get("node_hours_granted") or 0
    base = _limit(account["node_hours_per_period"])
    return f"{base}+{granted:g}" if granted and account["node_hours_per_period"] is not None else base


def _above_quota(account: JSON) -> bool:
    """Holding more GPUs within its quota than the quota allows (borrowing beyond it is not this), as the server says."""
    within = account["usage"].get("gpus_within_quota")
    return account["max_gpus"] is not None and within is not None and within > account["max_gpus"]


def _node_extras(node: JSON) -> str:
    """What a node offers beyond whole GPUs: its GPU slices (free of all), its RDMA devices, its block; and what pods
    Muster did not start hold there."""
    extras = []
    if node.get("gpus_foreign") or node.get("slices_foreign"):
        held = plural(node["gpus_foreign"], "GPU") if node.get("gpus_foreign") else plural(node["slices_foreign"], "slice")
        extras.append(f"{held} held by other pods")
    if node.get("sharing"):
        slices = node["slices_per_gpu"] * node["gpus_total"]
        memory = f", {node['slice_memory_gb']:g} GB" if node.get("slice_memory_gb") else ""
        extras.append(f"{node['sharing']} {node['slices_free']} of {slices} slices free, {node['slice_gpus']:.3g} GPU each{memory}")
    if node.get("rdma_devices"):
        extras.append(f"{node['rdma_devices']} RDMA")
    if node.get("block"):
        extras.append(f"block {node['block']}")
    return "; ".join(extras)


def _node_state(node: JSON) -> str:
    """Its state, and whether it takes new work: HELD by an admin (and why, as sinfo -R says a drain's reason), or
    SETTLING after being unready (until when)."""
    held = f"HELD ({node['held_reason']})" if node.get("held_reason") else "HELD"
    marks = [node["state"]] + ([held] if node.get("held") else [])
    if (node.get("closed_by") or "cordoned") != "cordoned":
        marks.append(node["closed_by"])  # a taint: `kubectl uncordon` does not open it
    if settles := node.get("settling_until"):
        marks.append(f"SETTLING until {when(settles)}")
    if window := node.get("maintenance"):
        marks.append(_maintenance_mark(window))
    return ", ".join(marks)


def _maintenance_mark(window: JSON) -> str:
    """`MAINT until 02:00:00 (firmware)` while on, `MAINT from 18:00:00 (firmware)` ahead; with the jobs running there
    that run on into it (`; job 12 in the way`), which the admin may want to ask about."""
    span = f"until {when(window['end'])}" if window.get("on") else f"from {when(window['start'])}"
    jobs = window.get("in_the_way") or []
    way = f"; {'job' if len(jobs) == 1 else 'jobs'} {', '.join(map(str, jobs))} in the way" if jobs else ""
    return f"MAINT {span} ({window['reason']}{way})"


def _in_maintenance(node: JSON) -> bool:
    return bool((node.get("maintenance") or {}).get("on"))


def _takes_work(node: JSON) -> bool:
    """Ready, not held by an admin, not in maintenance, not settling after being unready: as the server counts a
    node's GPUs free."""
    return node["state"] == "READY" and not node.get("held") and not node.get("settling_until") and not _in_maintenance(node)


def _node_gpus(node: JSON) -> str:
    """Free of all, and a node that takes no new work (cordoned, tainted, NotReady, held, settling) its idle GPUs
    beside: `0/8 (8 idle)`, not "8/8" free beside a last line of none free. A server before `gpus_idle` counted idle
    GPUs free whatever the node's state."""
    idle = node.get("gpus_idle", node["gpus_free"])
    free = node["gpus_free"] if _takes_work(node) else 0
    return f"{free:g}/{node['gpus_total']}" + (f" ({idle:g} idle)" if idle != free else "")


def nodes_text(nodes: Sequence[JSON]) -> str:
    """One row a node; a node that takes no new work (held by an admin, settling after being unready) says so, and its
    GPUs are not counted free."""
    rows = [(n["name"], n["rack"], _node_state(n), _node_gpus(n), n["gpu_model"], _node_extras(n)) for n in nodes]
    closed = [n for n in nodes if n.get("held") or n.get("settling_until") or _in_maintenance(n)]
    open_nodes = [n for n in nodes if _takes_work(n)]
    # As the cluster page sums them: whole-GPU nodes' GPUs (what whole-GPU jobs may take), and apart from them the
    # shares shared nodes' slices leave, which only GPU-slice jobs take (each row: 7.5/8 and its slices free).
    free = sum(math.floor(n["gpus_free"]) for n in open_nodes if not n.get("sharing"))
    total = sum(n["gpus_total"] for n in nodes if not n.get("sharing"))
    shared = [n for n in nodes if n.get("sharing")]
    sliced = ""
    if shared:
        shared_free = round(sum(n["gpus_free"] for n in open_nodes if n.get("sharing")), 3)
        shared_total = sum(n["gpus_total"] for n in shared)
        sliced = (
            f" for whole-GPU jobs; on {plural(len(shared), 'shared node')} (GPU slices only), {shared_free:g} of {shared_total} GPUs free"
        )
    table_text = table(["NODE", "RACK", "STATE", "GPUS FREE", "MODEL", "SHARING, FABRIC"], rows)
    held = sum(1 for n in closed if n.get("held"))
    maint = sum(1 for n in closed if not n.get("held") and _in_maintenance(n))
    counts = [(held, "held"), (maint, "in maintenance"), (len(closed) - held - maint, "settling after being unready")]
    why = [f"{k} {what}" for k, what in counts if k]
    if why:  # the first says what it counts: "1 node held, 2 settling after being unready"
        first = next(k for k, _ in counts if k)
        why[0] = why[0].replace(" ", f" node{'s' if first != 1 else ''} ", 1)
    but = f" ({', '.join(why)}: no new work)" if why else ""
    return f"{table_text}\n{plural(len(nodes), 'node')}, {free:g} of {total} GPUs free{sliced}{but}"


def maintenance_table(windows: Sequence[JSON]) -> str:
    """One row a window not over yet: its nodes as squeue writes them, when, ON while it is, why, and the jobs running on
    its nodes now (`scontrol show reservation`, with what is in the way)."""
    if not windows:
        return "No maintenance planned."
    rows = []
    for w in windows:
        running = sorted({job for ids in (w.get("running") or {}).values() for job in ids})
        rows.append(
            (
                w["id"],
                w["nodelist"],
                stamp(w["start"]),
                stamp(w["end"]),
                "ON" if w.get("on") else "planned",
                w["reason"],
                ", ".join(map(str, running)) if running else "-",
            )
        )
    return table(["ID", "NODES", "START", "END", "STATE", "REASON", "JOBS RUNNING THERE"], rows)


LIMIT_MARK = {"ok": "ok", "waits": "waits", "refused": "NO"}


def _start_nodes(start: JSON) -> str:
    """An elastic job's nodes it would start on now, of its range: " on 3 of 2-8 nodes" (a server that does not say: "")."""
    if start.get("nodes") is None or start.get("min_nodes") is None or start.get("max_nodes") is None:
        return ""
    return f" on {start['nodes']} of {start['min_nodes']}-{start['max_nodes']} nodes"


def _stops(start: JSON) -> str:
    """ ", preempting job 2 (gang-4, bob) and shrinking job 3 (wide, bob) from 6 to 2 nodes"; a server that names none: the count."""
    named = [f"job {j['id']} ({j['name']}, {j['owner']})" for j in start.get("stopped") or ()]
    shrunk = [
        f"job {j['id']} ({j['name']}, {j['owner']}) from {j['from_nodes']} to {j['to_nodes']} nodes" for j in start.get("shrunk") or ()
    ]
    parts = []
    if named:
        parts.append(f"preempting {_and(named)}")
    elif start.get("preempts"):
        parts.append(f"preempting {start['preempts']} job{'s' if start['preempts'] != 1 else ''}")
    if shrunk:
        parts.append(f"shrinking {_and(shrunk)}")
    return f", {' and '.join(parts)}" if parts else ""


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def estimate_text(estimate: JSON, *, now: datetime | None = None) -> str:
    """`muster submit --test-only`: would it be accepted, the limits, and when it would start (sbatch --test-only's line)."""
    start = estimate["start"]
    if not estimate["accepted"]:
        lines = ["It would be refused:"] + [f"  {field}: {m}" for field, messages in estimate["problems"].items() for m in messages]
    elif start["kind"] == "now":
        lines = [f"It would start now{_start_nodes(start)} (the next scheduling cycle places it{_stops(start)})."]
    elif start["at"]:
        prefix = {"reserved": "by ", "planned": "about ", "after": "not before "}.get(start["kind"], "")
        place = f", number {start['position']} in the queue" if start.get("position") else ""
        lines = [f"It would start {prefix}{when(start['at'], now=now)} ({until(start['at'], now=now)}){place}."]
    else:
        lines = ["Its start cannot be estimated now."]
    if estimate["accepted"] and start.get("reason"):
        lines.append(f"  {start['reason']}")
    if estimate.get("array_index") is not None:
        # sbatch --test-only --array answers for the array's first task; the others queue behind it.
        count = estimate.get("count", 1)
        lines.append(f"  That is the array's first element (index {estimate['array_index']}) of {count}; the others queue behind it.")
    # A refused limit is one of the problems said above, in the submit's words: listed once, not again as [NO].
    shown = [check for check in estimate["limits"] if estimate["accepted"] or check["status"] != "refused"]
    lines += [f"  [{LIMIT_MARK.get(check['status'], check['status'])}] {check['text']}" for check in shown]
    return "\n".join([*lines, "Nothing was submitted."])
