"""`muster`: Muster from a terminal, in Slurm's habits (sbatch, squeue, sprio, scancel, tail -f).

Exit codes: 0 done, 1 the job waited for did not succeed, 2 a usage error, 3 the server cannot be reached
or is unavailable (try again later), 4 no token or a token the server refuses, 5 the server refused the request.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import textwrap
from collections.abc import Callable, Sequence
from datetime import datetime
from importlib.metadata import PackageNotFoundError, version

from muster_client import commands, render
from muster_client.errors import ApiError, AuthError, MusterError, Unreachable
from muster_client.spec import WALL_TIME_FORMS, SpecError, parse_dependency, parse_node_count, parse_wall_time

USAGE_ERROR, UNREACHABLE, AUTH, REFUSED = 2, 3, 4, 5

DESCRIPTION = """\
Submit and follow GPU jobs on a Muster cluster from a terminal.

Start with `muster login URL`; the token is kept in ~/.config/muster/config.json
(MUSTER_URL and MUSTER_TOKEN override it). Every read command takes --json.
"""

EPILOG = """\
examples:
  muster login http://muster.example:8000
  muster submit job.yaml                      # like sbatch job.sh, from a YAML file of the job's fields
  muster submit -N 2 -G 8 -t 4h --image nvcr.io/nvidia/pytorch:24.05-py3 -- torchrun train.py
  muster queue                                # like squeue: pending (with expected starts) and running jobs
  muster why 42                               # like sprio -j 42, with the pending reason
  muster logs -f 42                           # like tail -f slurm-42.out
  muster wait 42 && echo done

exit codes: 0 ok, 1 the job waited for failed, 2 usage error, 3 server unreachable or unavailable,
4 missing or refused token, 5 the server refused the request.
Run `muster COMMAND --help` for each command's options and examples.
"""


def _wall_time(text: str) -> int:
    try:
        return parse_wall_time(text)
    except SpecError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _node_count(text: str) -> tuple[int, int | None]:
    """-N as sbatch takes it: 4, or 2-8 for an elastic job (min-max); 4-4 is 4, as in sbatch."""
    try:
        return parse_node_count(text)
    except SpecError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


MAIL_TYPES = {
    "BEGIN": ["start"],
    "END": ["end"],
    "FAIL": ["fail"],
    "REQUEUE": ["requeue"],
    "ALL": ["start", "end", "fail", "requeue"],
    "NONE": [],
}


def _dependency(text: str) -> list[dict[str, object]]:
    """--dependency as sbatch takes it (spec.parse_dependency): `afterok:12:13,afterany:14`."""
    try:
        return parse_dependency(text)
    except SpecError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _dependency_or_none(text: str) -> list[dict[str, object]]:
    """An update's --dependency: as submit takes it, or '' for none (scontrol update's Dependency= clears them)."""
    return [] if not text.strip() else _dependency(text)


def _mail_type(text: str) -> list[str]:
    """--mail-type as sbatch takes it: BEGIN, END, FAIL, REQUEUE, ALL or NONE, comma-separated; Muster's events."""
    events: list[str] = []
    words = [w.strip().upper() for w in text.split(",")]
    for word in words:
        if word not in MAIL_TYPES:
            raise argparse.ArgumentTypeError(f"'{word}' is not a mail type: use BEGIN, END, FAIL, REQUEUE, ALL or NONE (comma-separated)")
        events += [e for e in MAIL_TYPES[word] if e not in events]
    others = [w for w in words if w != "NONE"]
    if "NONE" in words and others:
        # `BEGIN,NONE` became `on: [start]`, NONE silently dropped: which was meant, nothing or the start?
        raise argparse.ArgumentTypeError(
            f"NONE (be told nothing) cannot go with {','.join(others)}: give NONE alone, or the types without it"
        )
    return events


def _non_negative(text: str) -> int:
    return _count(text)


# Job ids are plain decimal digits. int() alone reads "1_2" as 12 (Python's digit separators), "+12" and " 12" as 12,
# and other scripts' digits as numbers: `muster checkpoint 1_2` reported a checkpoint for job 12.
_DIGITS = re.compile(r"[0-9]+")
JOB_FORMS = "write 42, or 42_7 for element 7 of array 42"


def _job_id(text: str) -> int:
    """A job's own id, plain digits only (`muster checkpoint`, `muster jobs --array`)."""
    if _DIGITS.fullmatch(text) is None:
        hint = f" (an array's element by its job id: `muster jobs --array {text.split('_')[0]}` lists them)" if "_" in text else ""
        raise argparse.ArgumentTypeError(f"'{text}' is not a job id: write its digits only, e.g. 42{hint}")
    return int(text)


def _job_ref(text: str) -> tuple[int, int | None]:
    """A job as squeue and scontrol name it: `42`, or `42_7` (element 7 of array 42, which the command looks up).
    Returns (id, index or None)."""
    match = re.fullmatch(r"([0-9]+)(?:_([0-9]+))?", text)
    if match is None:
        raise argparse.ArgumentTypeError(f"'{text}' is not a job: {JOB_FORMS}")
    return int(match.group(1)), int(match.group(2)) if match.group(2) is not None else None


def _count(text: str, *, least: int = 0) -> int:
    if _DIGITS.fullmatch(text) is None:
        what = "negative" if re.fullmatch(r"-[0-9]+", text) else "not a whole number"
        raise argparse.ArgumentTypeError(f"'{text}' is {what}")
    if int(text) < least:
        raise argparse.ArgumentTypeError(f"'{text}': give at least {least}")
    return int(text)


def _positive(text: str) -> int:
    return _count(text, least=1)


def _array_spec(text: str) -> str:
    """--array as sbatch writes it: 0-99, 1,3,5-7, 0-98:2. An empty one submitted a plain job; Slurm's `%N` (at most N
    elements running at once) Muster does not have: said here, before anything is sent."""
    spec = text.strip()
    if not spec:
        raise argparse.ArgumentTypeError("an array needs its indices: 0-99, 1,3,5-7 or 0-98:2")
    if "%" in spec:
        raise argparse.ArgumentTypeError(
            f"'{text}': Muster has no %N limit of elements running at once (your quota limits them); write {spec.split('%')[0]}"
        )
    if not all(re.fullmatch(r"[0-9]+(?:-[0-9]+(?::[0-9]+)?)?", part.strip()) for part in spec.split(",")):
        raise argparse.ArgumentTypeError(f"'{text}' is not an array's indices: write 0-99, 1,3,5-7 or 0-98:2")
    return spec


def _at(text: str) -> str:
    """--at: a time in ISO 8601 with its zone (2026-11-26T17:30:00Z), checked before it is sent."""
    try:
        moment = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text)
    except ValueError:
        moment = None
    if moment is None or moment.tzinfo is None:
        raise argparse.ArgumentTypeError(f"'{text}' is not a time with its zone: write it as 2026-11-26T17:30:00Z (or +01:00)")
    return text


CANCEL_FORMS = "write 42, 42_7 (element 7 of array 42) or 42_[1-3,8]"
# An array has at most MUSTER_MAX_ARRAY_SIZE (1,000) elements; more indices than this ask for nothing more.
MAX_CANCEL_INDICES = 100_000


def _cancel_target(text: str) -> tuple[int, tuple[int, ...] | None]:
    """scancel's forms: `42` (a job, or every element of array 42), `42_7` and `42_[1-3,8]` (elements by index, with
    sbatch --array's syntax inside the brackets: `0-98:2` too). Returns (id, indices or None)."""
    match = re.fullmatch(r"([0-9]+)(?:_([0-9]+|\[([^\]]*)\]))?", text)
    if match is None:
        raise argparse.ArgumentTypeError(f"'{text}' is not a job: {CANCEL_FORMS}")
    job_id = int(match.group(1))
    if match.group(2) is None:
        return job_id, None
    if match.group(3) is None:
        return job_id, (int(match.group(2)),)
    indices: set[int] = set()
    for part in match.group(3).split(","):
        span = re.fullmatch(r"([0-9]+)(?:-([0-9]+)(?::([0-9]+))?)?", part.strip())
        if span is None:
            raise argparse.ArgumentTypeError(f"'{part}' in '{text}' is not an index or a range: {CANCEL_FORMS}")
        first = int(span.group(1))
        last = int(span.group(2)) if span.group(2) is not None else first
        step = int(span.group(3)) if span.group(3) is not None else 1
        if last < first or step < 1:
            raise argparse.ArgumentTypeError(f"'{part}' in '{text}' ends before it starts or has a step of 0")
        if (last - first) // step + 1 + len(indices) > MAX_CANCEL_INDICES:
            raise argparse.ArgumentTypeError(f"'{text}' names more indices than an array has: {job_id} alone cancels all of it")
        indices.update(range(first, last + 1, step))
    return job_id, tuple(sorted(indices))


# Slurm's names of a state Muster names otherwise: squeue's and sacct's short ones (`-t PD,R`, `-s CD,F,CA,TO`) and
# sacct's long ones. The API takes Muster's names only, so the client maps them.
SLURM_STATES = {
    "PD": "PENDING",
    "CF": "SCHEDULED",
    "CONFIGURING": "SCHEDULED",
    "R": "RUNNING",
    "CD": "SUCCEEDED",
    "COMPLETED": "SUCCEEDED",
    "F": "FAILED",
    "CA": "CANCELLED",
    "TO": "TIMED_OUT",
    "TIMEOUT": "TIMED_OUT",
    "PR": "PREEMPTED",
}
# `muster queue -t`: the states a job waits or runs in, by Muster's names and Slurm's.
QUEUE_STATES = {"PENDING": "PENDING", "SCHEDULED": "SCHEDULED", "RUNNING": "RUNNING"} | {
    slurm: state for slurm, state in SLURM_STATES.items() if state in ("PENDING", "SCHEDULED", "RUNNING")
}


def _queue_states(text: str) -> list[str]:
    """-t as squeue takes it: PENDING,RUNNING or PD,R, any case; the states `muster queue` shows."""
    states = []
    for word in (w.strip().upper() for w in text.split(",") if w.strip()):
        if word not in QUEUE_STATES:
            raise argparse.ArgumentTypeError(
                f"'{word}' is not a state the queue shows: use PENDING (PD), SCHEDULED (CF) or RUNNING (R); "
                "ended jobs are in `muster jobs --state`"
            )
        states.append(QUEUE_STATES[word])
    return states


def _job_states(text: str) -> list[str]:
    """--state as sacct's -s takes it: SUCCEEDED,FAILED or CD,F, any case. A word that is neither Muster's nor Slurm's
    is sent as it is, and the server refuses it naming the states there are."""
    return [SLURM_STATES.get(word, word) for word in (w.strip().upper() for w in text.split(",") if w.strip())]


def _gres(text: str) -> int:
    """--gres as sbatch takes GPUs: `gpu:N` (N GPUs on each node, as -G N), `gpu` alone one. Muster places by GPU
    count, not model, so `gpu:h100:8` is refused, naming the form it takes, rather than run on whatever GPUs are free."""
    parts = text.strip().split(":")
    if parts[0].lower() != "gpu" or "," in text or len(parts) > 3:
        raise argparse.ArgumentTypeError(f"'{text}': Muster's --gres takes GPUs only, gpu:N (N GPUs on each node, as -G N)")
    if len(parts) == 1:
        return 1
    if len(parts) == 2 and parts[1].isdigit():
        if int(parts[1]) < 1:
            raise argparse.ArgumentTypeError(f"'{text}' asks for no GPU: gpu:N with N at least 1 (a share of one GPU: --gpu-fraction)")
        return int(parts[1])
    count = parts[2] if len(parts) == 3 and parts[2].isdigit() else "N"
    raise argparse.ArgumentTypeError(
        f"'{text}' names a GPU model ({parts[1]}), and Muster cannot be asked for one: it places a job on any node with "
        f"its GPUs free. Ask for the count only: --gres=gpu:{count} (or -G {count}); `muster nodes` lists each node's model"
    )


def _names(text: str) -> list[str]:
    """-n/--name as squeue and sacct take it: one job name or several, comma-separated, each matched whole.

    A job's name may have a comma (sbatch -J 'lr=0.1,bs=32' is taken, here as in Slurm), which squeue's list can never
    match: the whole text is one more name, last, so `-n 'lr=0.1,bs=32'` finds that job too (and those named lr=0.1
    or bs=32, as squeue)."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    if not names:
        raise argparse.ArgumentTypeError(f"'{text}' names no job: -n NAME, or -n NAME,NAME for several")
    return [*names, text.strip()] if "," in text else names


def _whole_name(text: str) -> str:
    """scancel -n: one job's whole name (a comma is part of it). An empty one names no job: `muster cancel -n ""`
    said "no ... job of yours named ; nothing was cancelled", where `muster queue -n ""` is refused."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"'{text}' names no job: -n NAME, a job's whole name")
    return text


def _job_ids(text: str) -> list[tuple[int, int | None]]:
    """-j as squeue takes it: one job or several, comma-separated, each `42` (the job, or every element of array 42)
    or `42_7` (element 7 of array 42). Returns (id, index or None) pairs."""
    words = [word.strip() for word in text.split(",") if word.strip()]
    try:
        if words:
            return [_job_ref(word) for word in words]
    except argparse.ArgumentTypeError:
        pass
    raise argparse.ArgumentTypeError(
        f"'{text}' is not a job or a comma-separated list of them (-j 42, -j 42,43, or -j 42_7: element 7 of array 42)"
    )


def _common(json_output: bool) -> argparse.ArgumentParser:
    """Options every subcommand takes, also after its name (`muster queue --url ...`)."""
    common = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    # SUPPRESS: a subcommand's unset option must not overwrite the same option given before the subcommand.
    common.add_argument("--url", default=argparse.SUPPRESS, help="the server (default: MUSTER_URL, else the last `muster login`)")
    common.add_argument("--token", default=argparse.SUPPRESS, help="an API token (default: MUSTER_TOKEN, else the stored one)")
    if json_output:
        common.add_argument("--json", action="store_true", help="print the API's JSON instead of a table, for scripts")
    return common


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="muster",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[_common(False)],
        # No abbreviations anywhere: `--gpus=8` was taken as --gpus-per-node, `--pre` as --preemptible, `--ti` as --time.
        allow_abbrev=False,
    )
    parser.add_argument("--version", action="version", version=f"muster {_version()}")
    sub = parser.add_subparsers(title="commands", metavar="COMMAND", required=True)

    def command(
        name: str, handler: Callable[[argparse.Namespace], int], summary: str, more: str, example: str, *, json_output: bool = True
    ) -> argparse.ArgumentParser:
        # `summary` is the command's line in `muster --help`; `muster NAME --help` adds `more` and examples.
        p = sub.add_parser(
            name,
            help=summary,
            description=textwrap.fill(f"{summary}. {more}", 88, break_on_hyphens=False) if more else f"{summary}.",
            epilog=f"examples:\n{example}",
            formatter_class=argparse.RawDescriptionHelpFormatter,
            parents=[_common(json_output)],
            allow_abbrev=False,
        )
        # The command's own parser, to say its usage when an argument it does not take is given (main).
        p.set_defaults(handler=handler, subparser=p)
        return p

    p = command(
        "login",
        commands.login,
        "Sign in and keep an API token for this server",
        "Asks for your username and password (or takes --username and MUSTER_PASSWORD) and stores the token in "
        "$XDG_CONFIG_HOME/muster/config.json (~/.config/muster), readable by you only. The server becomes the default.",
        "  muster login http://muster.example:8000\n"
        "  MUSTER_PASSWORD=... muster login --username ci-bot http://muster.example:8000   # in a script",
        json_output=False,
    )
    p.add_argument("server", nargs="?", metavar="URL", help="the server, e.g. http://muster.example:8000")
    p.add_argument("--username", "-u", help="your username (asked otherwise); the password comes from MUSTER_PASSWORD or is asked")

    p = command(
        "logout",
        commands.logout,
        "Revoke and forget the token kept for this server",
        "The token `muster login` made from your password is revoked on the server (it stops working at once) and removed "
        "from the config file; the default server becomes the last other one logged in to. A token kept with `login --token` "
        "is only forgotten (it was made on the Tokens page and may be in use elsewhere).",
        "  muster logout\n  muster logout http://muster.example:8000",
        json_output=False,
    )
    p.add_argument("server", nargs="?", metavar="URL", help="the server (default: the default server)")

    p = command(
        "submit",
        commands.submit,
        "Queue a job from a YAML file and/or flags, like sbatch",
        "Flags override the file. The YAML's keys are the API's fields: name, image, command (a list, or one "
        "string split as a shell would), nodes (4, or 2-8 for an elastic job, as -N), gpus_per_node, "
        "wall_time_seconds (seconds, or a wall time such as 4h), min_nodes, max_nodes, rdma_per_node, gpu_fraction, "
        "gpu_memory_gb, gpu_isolation, env, priority_class, dependencies (as -d writes them, or the API's list), "
        "max_restarts, team, preemptible, volumes, simulate, array. Prints the job's id; "
        "--json prints the job.",
        "  muster submit job.yaml\n"
        "  muster submit job.yaml -N 4 -t 12h                      # the file, with 4 nodes and 12 hours\n"
        "  muster submit -N 2 -G 8 -t 4h --image nvcr.io/nvidia/pytorch:24.05-py3 -- torchrun --nproc-per-node 8 train.py\n"
        "  muster submit sweep.yaml --array 0-99                   # 100 jobs; each reads MUSTER_ARRAY_INDEX\n"
        "  muster submit job.yaml --dry-run                        # would it be accepted? nothing is queued\n"
        "  muster submit job.yaml --test-only                      # and when would it start? (sbatch --test-only)\n"
        "  muster submit --gpu-fraction 0.25 -t 1h --image IMAGE -- python eval.py   # a quarter of one GPU\n"
        "  muster submit job.yaml -N 2-8                           # elastic: 2 to 8 nodes (torchrun --nnodes=2:8)\n\n"
        "job.yaml:\n"
        "  name: llama-ft\n"
        "  image: nvcr.io/nvidia/pytorch:24.05-py3\n"
        "  command: torchrun --nproc-per-node 8 train.py --lr 3e-4\n"
        "  nodes: 2\n"
        "  gpus_per_node: 8\n"
        "  wall_time_seconds: 4h\n"
        "  env: {WANDB_PROJECT: llama}",
    )
    p.add_argument("spec_file", nargs="?", metavar="job.yaml", help="the job's fields in YAML")
    p.add_argument(
        "-N", "--nodes", type=_node_count, metavar="N|MIN-MAX",
        help="nodes (ranks), all started at once (default 1); MIN-MAX (e.g. 2-8) for an elastic job, as sbatch -N takes it",
    )  # fmt: skip
    p.add_argument("-G", "--gpus-per-node", type=_non_negative, help="GPUs on each node")
    p.add_argument(
        "--gpus", metavar="N",
        help="sbatch's GPUs for the whole job: refused, naming the -N and -G that ask for them (Muster asks GPUs per node)",
    )  # fmt: skip
    p.add_argument(
        "--gres", type=_gres, metavar="gpu:N",
        help="as sbatch --gres=gpu:N: N GPUs on each node (-G N); a GPU model (gpu:h100:8) cannot be asked for",
    )  # fmt: skip
    p.add_argument(
        "--rdma-per-node", type=_non_negative, metavar="N",
        help="RDMA devices on each node (multi-node jobs; nodes without them are skipped)",
    )  # fmt: skip
    p.add_argument(
        "--gpu-fraction", type=float, metavar="SHARE", help="a share of one GPU (0.01-0.99) on a node whose GPUs are shared, e.g. 0.25"
    )
    p.add_argument("--gpu-memory", type=float, metavar="GB", dest="gpu_memory_gb", help="GPU memory the slice must guarantee (MPS, MIG)")
    p.add_argument("--gpu-isolation", action="store_true", help="the slice must be isolated in hardware (MIG only)")
    p.add_argument(
        "--mail-type", type=_mail_type, metavar="TYPES",
        help=(
            "be told when it starts/ends/fails/is requeued, as sbatch: BEGIN, END, FAIL, REQUEUE, ALL, NONE "
            "(e-mail to your address; default: your default)"
        ),
    )  # fmt: skip
    p.add_argument("--webhook", metavar="URL", help="with --mail-type: also POST each to this URL as JSON")
    p.add_argument(
        "-d", "--dependency", type=_dependency, metavar="TYPE:ID[:ID],...",
        help="start only once these jobs have ended as asked, as sbatch: afterok (succeeded), afternotok (failed), "
        "afterany (ended); e.g. afterok:12:13,afterany:14; an array's id names every element, 14_2 one of them",
    )  # fmt: skip
    p.add_argument("-t", "--time", type=_wall_time, metavar="WALL_TIME", help=f"wall time: {WALL_TIME_FORMS}")
    p.add_argument("--image", help="container image, e.g. nvcr.io/nvidia/pytorch:24.05-py3")
    p.add_argument("-J", "--name", "--job-name", dest="name", help="job name (default: the YAML file's name, else the command's)")
    p.add_argument("--priority-class", help="production, normal or preemptible (production: admins and the teams given it)")
    p.add_argument("--max-restarts", type=_non_negative, help="restart a failed attempt up to this many times")
    p.add_argument("--team", help="charge a team you belong to")
    p.add_argument("--preemptible", action="store_true", help="may borrow idle GPUs beyond your quota; preempted first")
    p.add_argument("-e", "--env", action="append", metavar="KEY=VALUE", help="an environment variable (repeat for more)")
    p.add_argument("-a", "--array", type=_array_spec, metavar="INDICES", help="one job per index, Slurm's syntax: 0-99, 1,3,5-7, 0-98:2")
    p.add_argument("--dry-run", action="store_true", help="print what would be submitted and whether it fits your limits; queue nothing")
    p.add_argument(
        "--test-only", action="store_true",
        help="like sbatch --test-only: whether it would be accepted, your limits, and when the queue would start it; queue nothing",
    )  # fmt: skip
    p.add_argument("--idempotency-key", metavar="KEY", help="a key of your own (e.g. a CI run id): resending it never makes a second job")
    # Words after job.yaml that are not after `--`: refused (they replaced the file's command), see commands._spec.
    p.add_argument("command", nargs="*", default=[], metavar="-- COMMAND", help="the command and its arguments, after --")

    p = command(
        "queue",
        commands.queue,
        "Pending, starting and running jobs, like squeue",
        "Pending jobs first, in the order the scheduler considers them: position, priority, why each waits and when "
        "it is expected to start (by 14:05: reserved, starts by then; ~14:05: planned, moves if higher-priority work "
        "arrives; after 14:05: not before then). Then the jobs on their nodes (SCHEDULED: starting, RUNNING), with "
        "their nodes, the time since they were placed and the time left of their wall time. Every user's pending "
        "jobs are listed; running ones only to their owners and admins, as the job list.",
        "  muster queue\n  muster queue -t PENDING          # like squeue --start: the pending jobs only\n"
        "  muster queue -t R --user alice\n  muster queue -j 42,43\n  muster queue --json | jq '.running[0]'",
    )
    p.add_argument("-u", "--user", help="only this user's jobs")
    p.add_argument(
        "-j", "--jobs", action="append", type=_job_ids, metavar="ID[,ID]",
        help="only these jobs, as squeue -j: comma-separated or repeated; an array's id lists its elements, 42_7 one of them",
    )  # fmt: skip
    p.add_argument(
        "-t",
        "--states",
        action="append",
        type=_queue_states,
        metavar="STATES",
        help="only jobs in these states, as squeue -t: PENDING (PD), SCHEDULED (CF: starting), RUNNING (R); "
        "comma-separated or repeated, in any case (default: all three)",
    )
    p.add_argument("--start", action="store_true", help="like squeue --start: the pending jobs only (-t PENDING)")
    p.add_argument(
        "-n", "--name", dest="names", action="append", type=_names, metavar="NAME[,NAME]",
        help="only jobs of these names, as squeue -n: each name whole, comma-separated or repeated (a name with a comma "
        "matches too, given whole)",
    )  # fmt: skip
    # Long only: squeue's -n is --name (`muster queue -n 5` was the first 5 entries).
    p.add_argument("--limit", type=_non_negative, default=0, metavar="N", help="the first N entries (default: all)")

    p = command(
        "jobs",
        commands.jobs,
        "Your jobs, newest first, like sacct",
        "An admin sees everyone's.",
        "  muster jobs\n  muster jobs --state RUNNING,PENDING\n  muster jobs -s CD,F,CA,TO          # as sacct -s: ended jobs\n"
        "  muster jobs --since 1d --name sweep,eval    # as sacct --name: jobs of exactly these names\n"
        "  muster jobs --array 42 --limit 0\n  muster jobs -n -s F | wc -l       # as sacct -n: no header, for scripts\n"
        "  muster jobs --sort=-size          # the largest first, as the job list's Size column sorts",
    )
    p.add_argument(
        "-s",
        "--state",
        action="append",
        type=_job_states,
        help="PENDING (PD), SCHEDULED (CF), RUNNING (R), SUCCEEDED (CD), FAILED (F), CANCELLED (CA), TIMED_OUT (TO), or "
        "PREEMPTED (PR): the PENDING jobs waiting again after a preemption; comma-separated or repeated, in any case",
    )
    p.add_argument(
        "--name", dest="names", action="append", type=_names, metavar="NAME[,NAME]",
        help="only jobs of these names, as sacct --name: each name whole, comma-separated or repeated (a name with a "
        "comma matches too, given whole)",
    )  # fmt: skip
    p.add_argument("-S", "--since", help="submitted since: 2h or 3d ago, or a date/time (2026-11-01, 2026-11-01T09:00)")
    p.add_argument("-E", "--until", help="submitted before: the same forms as --since")
    p.add_argument("--array", type=_job_id, metavar="ARRAY_ID", help="the elements of one array")
    p.add_argument("-u", "--user", help="an owner's username (admins)")
    p.add_argument(
        "--sort",
        metavar="KEY",
        help="id, name, owner, state, size (GPUs), time (run time), priority or submitted; -KEY reverses it "
        "(default -submitted: newest first)",
    )
    # Long only, and -n is sacct's --noheader (`muster jobs -n 10` was the first 10 jobs: main says so).
    p.add_argument("--limit", type=_non_negative, default=50, metavar="N", help="at most N jobs (default 50; 0: all)")
    p.add_argument("-n", "--noheader", action="store_true", help="no header line (nor the legend or `0 jobs` under it), as sacct -n")

    p = command(
        "show",
        commands.show,
        "Everything about one job, like scontrol show job",
        "State, placement, restarts, the attempts whose logs are kept, and its whole history.",
        "  muster show 42",
    )
    p.add_argument("job_id", type=_job_ref, metavar="ID", help=f"the job: {JOB_FORMS}")

    p = command(
        "why",
        commands.why,
        "Why a job waits and what its priority is made of, like sprio",
        "Its pending reason, place in the queue and expected start, and each priority factor's part, as the last "
        "scheduling cycle computed them.",
        "  muster why 42",
    )
    p.add_argument("job_id", type=_job_ref, metavar="ID", help=f"the job: {JOB_FORMS}")

    p = command(
        "logs",
        commands.logs,
        "A rank's output, live or kept, like tail -f",
        "Read live while the attempt runs, and kept after it ends: every attempt's output stays readable.",
        "  muster logs 42                  # rank 0 of the latest attempt\n"
        "  muster logs 42 --rank 3 --attempt 1\n"
        "  muster logs -f 42               # follow as it is written (waits for the job to start), each attempt in turn",
    )
    p.add_argument("job_id", type=_job_ref, metavar="ID", help=f"the job: {JOB_FORMS}")
    p.add_argument("-r", "--rank", type=_non_negative, default=0, help="which rank (default 0, the master)")
    p.add_argument("-A", "--attempt", type=_positive, help="which attempt, 1 the first (default: the latest)")
    p.add_argument(
        "--tail", type=_positive, metavar="N", help="only the last N lines (default 500; with -f: from the last N, as tail -n N -f)"
    )
    p.add_argument(
        "-f", "--follow", action="store_true", help="stream the output until the job ends, through its requeues (with -A: that attempt's)"
    )
    p.add_argument("--poll", type=float, default=2.0, help=argparse.SUPPRESS)

    p = command(
        "wait",
        commands.wait,
        "Wait for a job to end; exit code 0 if it succeeded",
        "Shows its state, queue position and ETA on stderr while it waits. Exits 0 if it SUCCEEDED and 1 if it "
        "FAILED, was CANCELLED or TIMED_OUT.",
        '  muster wait 42 && muster logs 42\n  id=$(muster submit job.yaml --json | jq .id) && muster wait "$id"',
    )
    p.add_argument("job_id", type=_job_ref, metavar="ID", help=f"the job: {JOB_FORMS}")
    p.add_argument("--poll", type=float, default=2.0, metavar="SECONDS", help="seconds between looks (default 2)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress line")

    p = command(
        "cancel",
        commands.cancel,
        "Cancel jobs, like scancel",
        "Pending jobs leave the queue; running ones are stopped (their output is kept). An array's id (the one "
        "`muster submit --array` printed) cancels every element of it not ended yet, as scancel does; ID_INDEX one "
        "element, ID_[INDICES] several (quote it: the shell reads brackets). An array is cancelled in one request: all "
        "of it or, if an index is not the array's, none.",
        "  muster cancel 42 43 44\n  muster cancel 4            # every element of array 4\n"
        "  muster cancel 4_7          # its element of index 7\n  muster cancel '4_[1-3,8]'\n"
        "  muster cancel -t PENDING   # all of your pending jobs\n"
        "  muster cancel -n sweep -t PD 4   # the pending ones named sweep of array 4",
    )
    p.add_argument("job_ids", type=_cancel_target, nargs="*", metavar="ID", help="jobs or arrays; with a filter, only these are looked at")
    p.add_argument("-n", "--name", type=_whole_name, help="only jobs of exactly this name, as scancel -n")
    p.add_argument(
        "-u", "--user", help="only this user's jobs, as scancel -u (anyone's for admins); without it a filter cancels your own only"
    )
    p.add_argument(
        "-t", "--state", dest="states", action="append", type=_queue_states, metavar="STATES",
        help="only jobs in these states, as scancel -t: PENDING (PD), SCHEDULED (CF), RUNNING (R); comma-separated or repeated",
    )  # fmt: skip
    p.add_argument("--reason", default="", metavar="TEXT", help="why, in a few words: added to each job's reason, which its owner reads")

    p = command(
        "requeue",
        commands.requeue,
        "Stop placed or running jobs and queue them again, like scontrol requeue",
        "Each job's pods are deleted and it waits again in the place its submit time gives it, to start as its next "
        "attempt. What it ran is charged; none of its restarts is spent (they are for failures). --hold holds it too "
        "(scontrol requeuehold): it is not started until `muster release`. A pending job is refused (it is queued "
        "already), as is an ended one (resubmit it).",
        "  muster requeue 42\n  muster requeue --hold 42 --reason 'node 7 is flaky'\n  muster requeue 4     # array 4's running elements\n"
        "  muster requeue '4_[1-2]'",
    )
    p.add_argument(
        "job_ids", type=_cancel_target, nargs="+", metavar="ID", help="the jobs; an array's id, ID_INDEX or ID_[INDICES] as for cancel"
    )
    p.add_argument("--hold", action="store_true", help="hold it once requeued, as scontrol requeuehold")
    p.add_argument("--reason", default="", metavar="TEXT", help="why, in a few words: added to the job's reason")

    p = command(
        "update",
        commands.update,
        "Change pending jobs before they start, like scontrol update",
        "Changes a pending job's wall time, name, priority class, restarts, preemptibility or dependencies (what it "
        "waits for, replaced; refused if a job would come to wait on itself); anything else it asks "
        "(image, command, nodes, GPUs, team) is cancelled and submitted again. Each value is checked as a submit checks "
        "it, against the owner's limits: you may raise a wall time up to your own most, not only lower it as in Slurm "
        "(your limits are checked here as at submit). A placed or running job is refused. An array's id updates every "
        "pending element in one request; ID_INDEX one element, ID_[INDICES] several (each must be pending). The next "
        "scheduling cycle plans the job by its new values (its estimated start is cleared until then).",
        "  muster update 42 --time 2:00:00 -J train-v2\n  muster update 4 --time 30m          # every pending element of array 4\n"
        "  muster update 42 --no-preemptible --max-restarts 2\n  muster update 42 -d afterok:40:12_3  # what it waits for; -d '' clears it",
    )
    p.add_argument("job_ids", type=_cancel_target, nargs="+", metavar="ID")
    p.add_argument("-t", "--time", type=_wall_time, metavar="WALL_TIME", help=f"the new wall time: {WALL_TIME_FORMS}")
    p.add_argument("-J", "--name", "--job-name", dest="name", help="the new name")
    p.add_argument("--priority-class", help="production, normal or preemptible (production: admins and the teams given it)")
    p.add_argument("--max-restarts", type=_non_negative, metavar="N", help="restart a failed attempt up to this many times")
    p.add_argument(
        "--preemptible", action=argparse.BooleanOptionalAction, default=None,
        help="may borrow idle GPUs beyond your quota, preempted first (--no-preemptible: not)",
    )  # fmt: skip
    p.add_argument(
        "-d", "--dependency", type=_dependency_or_none, metavar="TYPE:ID[:ID],...",
        help="what it waits for from now on, as submit -d takes it (afterok:12:13,afterany:14_2); '' clears it",
    )  # fmt: skip

    p = command(
        "hold",
        commands.hold,
        "Keep pending jobs queued but never started, like scontrol hold",
        "A held job keeps its place in the queue (its age) but is not started, and blocks nobody, until `muster release`. "
        "`muster queue` shows it with reason HELD. Only a pending job can be held. An admin's hold on your job (Slurm's "
        "JobHeldAdmin) only an admin can release. An array's id holds its pending elements; ID_INDEX one, ID_[INDICES] several.",
        "  muster hold 42 43\n  muster hold 4               # every pending element of array 4\n  muster release 42",
    )
    p.add_argument("job_ids", type=_cancel_target, nargs="+", metavar="ID")

    p = command(
        "release",
        commands.release,
        "Let held jobs start again, like scontrol release",
        "A released job may start from the next scheduling cycle, in the place its age gives it. An array's id releases its held elements.",
        "  muster release 42\n  muster release '4_[1-3]'",
    )
    p.add_argument("job_ids", type=_cancel_target, nargs="+", metavar="ID")

    p = command(
        "checkpoint",
        commands.checkpoint,
        "Report that a running job wrote a checkpoint",
        "A preemption then throws away only the work since it, and Muster prefers to stop the jobs that lose least. "
        "Inside the job it needs no login: the job id, attempt, address and token come from the pod's MUSTER_JOB_ID, "
        "MUSTER_ATTEMPT, MUSTER_CHECKPOINT_URL and MUSTER_TELEMETRY_TOKEN. Outside it, your login reports for your own jobs.",
        "  muster checkpoint --step 4000                # in the job, after saving its state\n"
        "  muster checkpoint 42 --at 2026-11-26T17:30:00Z",
    )
    p.add_argument("job_id", type=_job_id, nargs="?", metavar="ID", help="the job's own id (default: MUSTER_JOB_ID, inside a job)")
    p.add_argument("--step", type=_non_negative, metavar="N", help="the training step the checkpoint holds")
    p.add_argument("--at", type=_at, metavar="TIME", help="when it was written, ISO 8601 with a zone (default: now)")

    p = command(
        "usage",
        commands.usage,
        "Your limits and use this budget period, and your teams'",
        "Admins: --all lists every user's and every team's, as each one's own `muster usage` says it (Slurm's sreport "
        "cluster AccountUtilizationByUser for the current period); --team NAME only that team and its members.",
        "  muster usage\n  muster usage --all\n  muster usage --all --team vision",
    )
    p.add_argument("--all", action="store_true", dest="all_accounts", help="every user's and team's (admins)")
    p.add_argument("--team", metavar="NAME", help="with --all: only this team and its members")
    p = command(
        "nodes",
        commands.nodes,
        "The cluster's nodes and free GPUs, like sinfo -N; admins hold and release nodes, and plan maintenance",
        "`muster nodes hold NODE... -r REASON` (admins; Slurm's scontrol update NodeName=... State=DRAIN Reason=...) places "
        "nothing new on the nodes until `muster nodes release NODE...` (State=RESUME); jobs running there run to their end, "
        "and are named. The reason is what users whose jobs wait for the nodes read beside HELD. Several nodes are held "
        "or released together, all or none; each is on the audit trail.\n\n"
        "`muster nodes maint NODE... --start TIME --duration SPAN -r REASON` (admins; Slurm's scontrol create reservation "
        "flags=maint) plans maintenance instead of holding now: before the start only jobs that end by it start there, "
        "from the start nothing new does, and at the end (--duration, or --end TIME) the nodes take work again by "
        "themselves. TIME is local unless it gives its zone (2026-11-28 18:00, 2026-11-28T18:00Z) or `now`; SPAN as -t "
        "takes a wall time (8h, 90m, 1-12:00:00). Windows on a node may not overlap. `--list` shows the windows not over "
        "yet (anyone) with the jobs running on their nodes; `--cancel ID` cancels one.",
        "  muster nodes\n  muster nodes hold gpu-07 gpu-08 -r 'PSU swap, back Monday'\n  muster nodes release 'gpu-[07-08]'\n"
        "  muster nodes maint 'gpu-[07-08]' --start '2026-11-28 18:00' --duration 8h -r 'firmware upgrade'\n"
        "  muster nodes maint --list\n  muster nodes maint --cancel 3",
    )
    p.add_argument(
        "action", nargs="?", choices=["hold", "release", "maint"], help="hold, release or plan maintenance of the NODEs named (admins)"
    )
    p.add_argument("names", nargs="*", metavar="NODE", help="a node's name, or several as squeue writes them: gpu-[07-08,12]")
    p.add_argument("-r", "--reason", help="why the nodes are held or go into maintenance (required; up to 200 characters)")
    p.add_argument("--start", metavar="TIME", help="maint: when it starts (2026-11-28 18:00, local unless zoned; or now)")
    p.add_argument("--duration", metavar="SPAN", help="maint: how long it lasts (8h, 90m, 1-12:00:00)")
    p.add_argument("--end", metavar="TIME", help="maint: when it ends, instead of --duration")
    p.add_argument("--list", action="store_true", dest="list_windows", help="maint: the windows not over yet")
    p.add_argument("--cancel", type=_positive, metavar="ID", help="maint: cancel this window")
    return parser


def _version() -> str:
    try:
        return version("muster-client")
    except PackageNotFoundError:
        return "unknown"


def _split_command(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    # Everything after the first `--` is the job's command, kept whole (argparse would take its first word for job.yaml).
    argv = list(argv)
    if "--" not in argv:
        return argv, []
    at = argv.index("--")
    return argv[:at], argv[at + 1 :]


def fail(message: str) -> None:
    print(f"muster: error: {message}", file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    own, command = _split_command(sys.argv[1:] if argv is None else argv)
    args, unknown = parser.parse_known_args(own)
    if unknown:
        # Said with the command's usage (argparse's top-level error gave `usage: muster [-h] [--url URL] ...`).
        hint = ""
        if "--json" in unknown and hasattr(args, "json"):
            # `muster --json jobs`: only --url and --token go before the command's name.
            hint = f" (--json goes after the command: muster {args.subparser.prog.split()[-1]} --json)"
        elif args.handler is commands.jobs and args.noheader and (count := next((w for w in unknown if w.isdigit()), None)):
            # `muster jobs -n 10`, as -n was until sacct's meaning replaced it: said, rather than "unrecognized: 10" alone.
            hint = f" (-n is --noheader, as sacct's: at most {render.plural(int(count), 'job')} is --limit {count})"
        args.subparser.error(f"unrecognized arguments: {' '.join(unknown)}{hint}")
    if args.handler is commands.submit and args.command:
        # `muster submit short.yaml other.yaml` queued the command `other.yaml` in place of the file's.
        if args.spec_file.endswith((".yaml", ".yml", ".json")) or args.spec_file == "-":
            words = " ".join(args.command)
            args.subparser.error(f"'{words}' after {args.spec_file}: a command goes after -- (muster submit {args.spec_file} -- {words})")
        words = " ".join([args.spec_file, *args.command])  # `muster submit -G 8 python train.py`: a command without --
        args.subparser.error(f"'{words}': a command goes after -- (muster submit -G 8 -t 1h --image IMAGE -- {words})")
    if command:
        if args.handler is not commands.submit:
            args.subparser.error("only `muster submit` takes a command after --")
        args.command = command
    try:
        return int(args.handler(args))
    except SpecError as exc:
        fail(str(exc))
        return USAGE_ERROR
    except Unreachable as exc:
        fail(str(exc))
        return UNREACHABLE
    except AuthError as exc:
        fail(str(exc))
        return AUTH
    except ApiError as exc:
        fail(exc.message)
        return UNREACHABLE if exc.status >= 500 else REFUSED
    except MusterError as exc:
        fail(str(exc))
        return REFUSED
    except KeyboardInterrupt:
        print(file=sys.stderr)
        return 130
    except BrokenPipeError:
        # `muster jobs | head`: the reader left. Say nothing, and keep Python's exit flush from failing on stdout too.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
