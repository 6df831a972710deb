"""What each `muster` subcommand does: read its arguments, call the client, print for a person or, with --json, for a script."""

from __future__ import annotations

import argparse
import getpass
import itertools
import json
import os
import re
import sys
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

import yaml

from muster_client import config, render
from muster_client.client import TERMINAL_STATES, Client, Job, server_url
from muster_client.errors import ApiError, AuthError, Unreachable
from muster_client.spec import SpecError, build_spec, format_duration, load_spec_file, name_for, parse_env, parse_wall_time

OK, JOB_FAILED, REFUSED = 0, 1, 5
JSON = dict[str, Any]


def out(text: str) -> None:
    print(text, flush=True)


def print_json(data: Any) -> None:
    out(json.dumps(data, indent=2))


def warn(text: str) -> None:
    print(f"muster: {text}", file=sys.stderr, flush=True)


def client_for(args: argparse.Namespace) -> Client:
    """The client the flags, environment and config file point to; AuthError if there is no token for that server."""
    settings = config.resolve(getattr(args, "url", None), getattr(args, "token", None))
    if not settings.url:
        raise AuthError("no server: run `muster login URL` (or set MUSTER_URL and MUSTER_TOKEN)")
    if not settings.token:
        raise AuthError(f"not logged in to {settings.url} — run `muster login {settings.url}`")
    return Client(settings.url, settings.token)


# --- login ----------------------------------------------------------------------------------------


def login(args: argparse.Namespace) -> int:
    url = args.server or getattr(args, "url", None) or os.environ.get("MUSTER_URL") or config.load().get("url")
    if not url:
        raise SpecError("give the server's URL: muster login http://muster.example:8000")
    if getattr(args, "token", None):
        return _login_with_token(url, args.token)
    try:
        username = args.username or input(f"Username [{_local_user()}]: ").strip() or _local_user()
        password = os.environ.get("MUSTER_PASSWORD") or getpass.getpass(f"Password for {username}: ")
    except EOFError:
        raise SpecError("no terminal to ask on: give --username and set MUSTER_PASSWORD") from None
    client = Client.login(url, username, password)
    path = config.save_token(client.url, str(client.token), username=username, expires_at=client.token_expires_at)
    expiry = f"; it expires {render.when(client.token_expires_at)}" if client.token_expires_at else ""
    out(f"Logged in to {client.url} as {username}. Token saved in {path}{expiry}.")
    return OK


def logout(args: argparse.Namespace) -> int:
    """Forget the token kept for the server and, if `muster login` made it from a password, revoke it there first, so a
    copy of the config file is worth nothing. A token given to `login --token` is only forgotten: made on the Tokens
    page, it may be in use elsewhere."""
    url = args.server or getattr(args, "url", None) or os.environ.get("MUSTER_URL") or config.load(strict=True).get("url")
    if not url:
        raise SpecError("not logged in to any server (give its URL: muster logout http://muster.example:8000)")
    url = server_url(url)
    entry = config.servers(config.load(strict=True)).get(url)
    if not isinstance(entry, dict) or not entry.get("token"):
        raise SpecError(f"not logged in to {url}: no token is kept for it")
    revoked = "is"
    if not entry.get("given"):
        try:
            Client(url, str(entry["token"])).revoke_token()
            revoked = "is revoked and"
        except AuthError:
            revoked = "had already been revoked or had expired, and is"
        except (Unreachable, ApiError) as exc:
            warn(f"the token could not be revoked ({exc}): revoke it on the Tokens page of {url}")
    config.forget_token(url)
    kept = " It was made on the Tokens page and still works: revoke it there if nothing else uses it." if entry.get("given") else ""
    out(f"Logged out of {url}: its token {revoked} forgotten.{kept}")
    if os.environ.get("MUSTER_TOKEN"):
        warn("MUSTER_TOKEN is set in your environment: commands still use it until you unset it")
    return OK


def _login_with_token(url: str, token: str) -> int:
    """`muster login --token T URL` (a token made on the Tokens page): kept for the server once it accepts it, no password
    asked. It was ignored: the password was asked and a new token made."""
    client = Client(url, token)
    user = client.usage()["user"]["name"]  # AuthError if the server refuses it: nothing is saved
    path = config.save_token(client.url, token, username=str(user), given=True)
    out(f"Logged in to {client.url} as {user} with the token given. Token saved in {path}.")
    return OK


def _local_user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # a container's user with no name: nothing to suggest
        return ""


# --- submit ---------------------------------------------------------------------------------------


def _gpus_hint(args: argparse.Namespace) -> SpecError:
    """sbatch's --gpus=N (GPUs for the whole job) said in Muster's words: GPUs per node, -G, with -N nodes. Not translated:
    with a job file's nodes, an elastic range or a count that does not divide, what was meant is a guess."""
    nodes = args.nodes[0] if args.nodes and args.nodes[1] is None else None
    total = args.gpus.strip()
    if nodes and total.isdigit() and int(total) % nodes == 0:
        example = f"--gpus={total} on {nodes} node{'s' if nodes != 1 else ''} is -N {nodes} -G {int(total) // nodes}"
    else:
        example = "--gpus=16 on 2 nodes is -N 2 -G 8"
    return SpecError(
        f"--gpus={total} is sbatch's GPUs for the whole job; Muster asks GPUs per node: -G/--gpus-per-node N with -N nodes ({example})"
    )


def _spec(args: argparse.Namespace) -> tuple[dict[str, Any], str | None]:
    if args.gpus is not None:
        raise _gpus_hint(args)
    try:
        base = load_spec_file(args.spec_file) if args.spec_file else {}
    except SpecError as exc:
        if not args.spec_file.endswith((".yaml", ".yml")) and args.spec_file != "-" and "#SBATCH" not in str(exc):
            # `muster submit train.py`: a Slurm user's habit, where sbatch takes a script.
            raise SpecError(f"{exc} (a command goes after --: muster submit -G 8 -t 1h --image IMAGE -- python train.py)") from exc
        raise
    overrides = {
        "name": args.name,
        "image": args.image,
        "command": args.command or None,
        # -N 2-8: an elastic job (its nodes are its max_nodes, which the server fills in).
        "nodes": args.nodes[0] if args.nodes and args.nodes[1] is None else None,
        "min_nodes": args.nodes[0] if args.nodes and args.nodes[1] is not None else None,
        "max_nodes": args.nodes[1] if args.nodes else None,
        "gpus_per_node": args.gpus_per_node if args.gpus_per_node is not None else args.gres,
        "rdma_per_node": args.rdma_per_node,
        "gpu_fraction": args.gpu_fraction,
        "gpu_memory_gb": args.gpu_memory_gb,
        "gpu_isolation": True if args.gpu_isolation else None,
        "wall_time_seconds": args.time,
        "priority_class": args.priority_class,
        "max_restarts": args.max_restarts,
        "team": args.team,
        "preemptible": True if args.preemptible else None,
        "env": parse_env(args.env or []),
        "notify": {"on": args.mail_type, "email": True, "webhook": args.webhook or ""} if args.mail_type is not None else None,
        "dependencies": args.dependency,
    }
    if args.gres is not None and args.gpus_per_node is not None and args.gres != args.gpus_per_node:
        raise SpecError(f"-G {args.gpus_per_node} and --gres=gpu:{args.gres} ask for different GPUs per node: give one of them")
    if args.webhook and args.mail_type is None:
        raise SpecError("--webhook needs --mail-type (BEGIN, END, FAIL, REQUEUE or ALL): what to tell it")
    if args.nodes and args.nodes[1] is None:
        # -N 4 over a file's elastic range: a fixed size, as asked.
        base = {k: v for k, v in base.items() if k not in ("min_nodes", "max_nodes")}
    spec = build_spec(base, overrides, fallback_name=name_for(args.spec_file, args.command or base.get("command")))
    if not spec.get("command"):
        # Said here: the server would also ask for a name, which the command gives when there is one.
        raise SpecError(
            "no command to run: give it after -- (muster submit -G 8 -t 1h --image IMAGE -- python train.py) or as command: in a job.yaml"
        )
    # The server would say "gpus_per_node: This field is required", naming no flag.
    missing = [
        ask
        for field, ask in (
            ("image", "--image IMAGE (image: in a job.yaml)"),
            (
                "gpus_per_node",
                "-G/--gpus-per-node N, the GPUs each node gets (gpus_per_node: in a job.yaml; a share of one GPU: --gpu-fraction)",
            ),
        )
        if spec.get(field) is None
    ]
    if missing:
        raise SpecError(f"missing {' and '.join(missing)}")
    array = spec.pop("array", None)
    array = args.array or array  # --array is checked as it is parsed (cli._array_spec); the file's here
    if array is not None and not str(array).strip():
        raise SpecError("array: an array needs its indices (0-99, 1,3,5-7 or 0-98:2); for one job leave array: out")
    return spec, str(array) if array is not None else None


def submit(args: argparse.Namespace) -> int:
    spec, array = _spec(args)
    client = client_for(args)
    if args.test_only:
        return _test_only(client, spec, array, as_json=args.json)
    if args.dry_run:
        return _dry_run(client, spec, array, as_json=args.json)
    if array is not None:
        created = client.submit_array(spec, array, idempotency_key=args.idempotency_key)
        if args.json:
            print_json(created)
        else:
            ids, array_id = [job["id"] for job in created["jobs"]], created["array_id"]
            span = f"{ids[0]} to {ids[-1]}" if len(ids) > 1 else str(ids[0])
            out(f"Submitted array {array_id}: {render.plural(created['count'], 'job')}, {span} (muster jobs --array {array_id})")
        return OK
    job = client.submit(spec, idempotency_key=args.idempotency_key)
    if args.json:
        print_json(job)
    else:
        out(f"Submitted job {job['id']} ({job['name']}): {job['state']}")
        cut = _range_cut(spec, job)
        if cut:
            out(cut)
    return OK


def _range_cut(spec: dict[str, Any], job: dict[str, Any]) -> str:
    """How far an elastic range the cluster cannot hold may grow on it for now (-N 2-40 on 16 nodes: to 16 for now,
    further if nodes are added), in the server's own words from the job's first event; "" when the cluster holds the
    range asked. The job keeps the range asked, so its max_nodes says nothing of it; a server that cut the range at
    submit said so in the same place."""
    if not spec.get("max_nodes"):
        return ""
    first = str((job.get("events") or [{}])[0].get("reason", ""))
    _, _, said = first.partition(". ")
    return said


def _dry_run(client: Client, spec: dict[str, Any], array: str | None, *, as_json: bool) -> int:
    shown = {**spec, **({"array": array} if array is not None else {})}
    try:
        answer = client.validate(spec, array)
    except ApiError as exc:
        if exc.status >= 500:
            raise
        if as_json:
            print_json({"spec": shown, "valid": False, "errors": exc.body})
        else:
            out("Would submit:\n" + _indent(yaml.safe_dump(shown, sort_keys=False)))
        raise ApiError(exc.status, f"it would be refused: {exc.message}", exc.body) from exc
    if as_json:
        print_json({"spec": shown, **answer})
        return OK
    count = answer.get("count", 1)
    out("Would submit:\n" + _indent(yaml.safe_dump(shown, sort_keys=False)))
    if answer.get("note"):
        out(answer["note"])  # what the submit would cut of the range asked
    out(f"It fits the cluster and your limits: {count} job{'s' if count != 1 else ''} would be queued. Nothing was submitted.")
    return OK


def _test_only(client: Client, spec: dict[str, Any], array: str | None, *, as_json: bool) -> int:
    """The server's estimate for this submit (an array's: its first element's, as sbatch --test-only --array): exit 0
    if it would be accepted, REFUSED (5) if not. Nothing is queued."""
    answer = client.estimate(spec, array)
    if as_json:
        print_json(answer)
    else:
        out(render.estimate_text(answer))
    return OK if answer["accepted"] else REFUSED


def _indent(text: str) -> str:
    return "\n".join(f"  {line}" for line in text.rstrip().splitlines())


# --- reading --------------------------------------------------------------------------------------


QUEUE_STATES = ("PENDING", "SCHEDULED", "RUNNING")


def queue(args: argparse.Namespace) -> int:
    """squeue: the pending jobs (the queue API: everyone's, in the cycle's order), then the jobs on their nodes (the
    jobs API: those the user may see, oldest first), each cut to what -t, --user, -j, -n and --limit ask."""
    asked = {state for group in args.states or [] for state in group} or set(QUEUE_STATES)
    if args.start:
        if args.states and asked != {"PENDING"}:
            # `--start -t R` showed the pending jobs and said nothing of -t.
            raise SpecError(f"--start is -t PENDING (squeue's --start): it cannot go with -t {','.join(sorted(asked))}")
        asked = {"PENDING"}
    states = [state for state in QUEUE_STATES if state in asked]
    wanted = {asked for group in args.jobs or [] for asked in group} or None

    def named(job: dict[str, Any]) -> bool:
        return any(_is_named(job, job_id, None if index is None else (index,)) for job_id, index in wanted or ())

    names = {name for group in args.names or [] for name in group} or None

    def kept(job: dict[str, Any]) -> bool:
        return (
            (not args.user or job["owner"] == args.user)
            and (wanted is None or named(job))
            and (names is None or job["name"] in names)  # squeue -n: the whole name
        )

    filtered = bool(args.user or wanted or names)
    client = client_for(args)
    limit = args.limit or None
    if "PENDING" in states:
        # The limit counts the entries shown: with --user or -j, theirs (the queue API filters neither).
        data = client.queue(max_entries=None if filtered else limit)
        if filtered:
            data["results"] = [entry for entry in data["results"] if kept(entry)][:limit]
    else:
        data = {**client.queue(max_entries=1), "results": []}  # its summary counts the whole queue
    active = [state for state in states if state != "PENDING"]
    left = None if limit is None else limit - len(data["results"])
    running: list[dict[str, Any]] = []
    visible = None
    if active and (left is None or left > 0):
        # Every one the user may see, oldest first (squeue's order; the jobs API's is newest first), then cut: --limit
        # kept the newest. Not by owner on the server: it lists only your own jobs to you, so `-u erin` was
        # refused though the queue shows erin's pending jobs; her running ones you may not see, which the summary says.
        seen = sorted(client.jobs(state=active), key=lambda job: job["id"])
        visible = len(seen)
        running = [job for job in seen if kept(job)][:left]
    numbers = sorted(name for name in names or () if "," not in name)  # not the whole of `-n 3,5` (cli._names)
    if numbers and all(name.isdigit() for name in numbers) and not data["results"] and not running:
        # `muster queue -n 5` was the first 5 entries until -n became squeue's --name: an empty queue would say
        # nothing of that. A job named 5 that is queued is still listed.
        count = numbers[0]
        raise SpecError(
            f"no job in the queue is named {', '.join(numbers)}: -n is a job's name, as squeue -n "
            f"(the first {render.plural(int(count), 'entry', 'entries')}: --limit {count})"
        )
    if args.json:
        print_json({**data, "running": running} if active else data)
    else:
        out(render.queue_table(data, running, states=states, filtered=filtered, limited=limit is not None, visible=visible))
        # Its estimates are the last cycle's: while no cycle can place anything they go stale, and the queue says why.
        if "cluster" in data.get("summary", {}):
            _warn_if_unusable(client, data["summary"]["cluster"])
    return OK


def parse_since(text: str, *, now: datetime | None = None) -> str:
    """`2h`, `3d` (that long ago) or an ISO 8601 date or time (local unless it says its zone), as ISO 8601."""
    refused = SpecError(f"'{text}' is neither a date (2026-11-01, 2026-11-01T09:00) nor a span ago (2h, 3d).")
    try:
        # Python 3.10's fromisoformat does not read a trailing Z.
        moment = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text)
    except ValueError:
        if text[-1:].isdigit():  # a bare number is minutes for -t, but means nothing as a time
            raise refused from None
        try:
            return ((now or datetime.now(timezone.utc)) - timedelta(seconds=parse_wall_time(text))).isoformat()
        except SpecError:
            raise refused from None
    return (moment if moment.tzinfo else moment.astimezone()).isoformat()


def jobs(args: argparse.Namespace) -> int:
    states = [state for value in args.state or [] for state in value]  # Muster's names (cli._job_states)
    names = list(dict.fromkeys(name for group in args.names or [] for name in group))
    filters = {
        "state": states or None,
        # The server's name filter matches a part of a name: it narrows one name's search; the exact match is below.
        "name": names[0] if len(names) == 1 else None,
        "array": args.array,
        "owner": args.user,
        "submitted_after": parse_since(args.since) if args.since else None,
        "submitted_before": parse_since(args.until) if args.until else None,
        "ordering": args.sort,
        "limit": min(args.limit, 500) if args.limit else None,  # the page size: no more rows fetched than shown
    }
    found = client_for(args).jobs(**filters)
    if names:
        found = (job for job in found if job["name"] in names)  # sacct --name: each name whole
    # One more than shown, to say when there are more (the default shows 50). A limit past what a list can hold
    # (--limit 99999999999999999999) is all of them: islice took it for a traceback.
    rows = list(itertools.islice(found, min(args.limit, sys.maxsize - 1) + 1) if args.limit else found)
    more = bool(args.limit) and len(rows) > args.limit
    rows = rows[: args.limit or None]
    if args.json:
        print_json(rows)
    else:
        table = render.jobs_table(rows, header=not args.noheader)
        if table:  # sacct -n of no job: nothing, not an empty line
            out(table)
    if more:
        which = f"the first {args.limit} by {args.sort}" if args.sort else f"the newest {args.limit}"
        warn(f"showing {which}; there are more (--limit N for more, --limit 0 for all).")
    return OK


def _element(client: Client, array_id: int, index: int) -> Job | None:
    """Element `index` of array `array_id` among the jobs the user may see, or None."""
    return next((job for job in client.jobs(array=array_id) if job.get("array_index") == index), None)


def _no_element(array_id: int, index: int) -> ApiError:
    return ApiError(404, f"No job {array_id}_{index}: array {array_id} has no element {index} (or none that you may see).")


def resolve(client: Client, ref: tuple[int, int | None]) -> int:
    """The job id of `42` or `42_7` (element 7 of array 42, as squeue names it and scancel takes it)."""
    job_id, index = ref
    if index is None:
        return job_id
    element = _element(client, job_id, index)
    if element is None:
        raise _no_element(job_id, index)
    return int(element["id"])


def show(args: argparse.Namespace) -> int:
    client = client_for(args)
    job = client.job(resolve(client, args.job_id))
    if args.json:
        print_json(job)
    else:
        out("\n".join(render.job_lines(job)))
    return OK


WHY_FIELDS = ("id", "name", "state", "state_reason", "pending_reason", "queue_position", "priority", "estimated_start", "estimate_kind")


def why(args: argparse.Namespace) -> int:
    client = client_for(args)
    try:
        job = client.job(resolve(client, args.job_id))
        theirs = None
    except ApiError as exc:
        # Another user's pending job: the queue lists everyone's, with its place, reason, priority and estimate, but
        # its page only to its owner and admins. Said from the queue, which shows no more than `muster queue` does.
        if exc.status != 404 or (entry := _queue_entry(client, args.job_id)) is None:
            raise
        job = {**entry, "state": "PENDING", "state_reason": "", "queue_position": entry["position"]}
        theirs = entry["owner"]
    if args.json:
        print_json({key: job.get(key) for key in WHY_FIELDS})
    else:
        out("\n".join(render.why_lines(job)))
        if theirs is not None:
            out(f"Job {job['id']} is {theirs}'s: this is what the queue shows of it; only its owner and admins see the rest.")
        if job["state"] not in TERMINAL_STATES:
            _warn_if_unusable(client)
    return OK


def _queue_entry(client: Client, ref: tuple[int, int | None]) -> dict[str, Any] | None:
    """The queue API's entry of a pending job (any user's: `42`, or `42_7` an array's element), or None when the queue
    does not list it."""
    job_id, index = ref

    def named(entry: dict[str, Any]) -> bool:
        return entry["id"] == job_id if index is None else (entry.get("array_id"), entry.get("array_index")) == (job_id, index)

    return next((entry for entry in client.queue()["results"] if named(entry)), None)


def logs(args: argparse.Namespace) -> int:
    if args.follow and args.json:
        # A follow is the job's text as it is written: there is no one JSON answer to print.
        raise SpecError("-f streams the output as text and takes no --json (without -f, --json prints what was written so far)")
    client = client_for(args)
    args.job_id = resolve(client, args.job_id)
    if args.follow:
        return _follow(client, args)
    answer = client.logs(args.job_id, rank=args.rank, attempt=args.attempt, tail=args.tail)
    if args.json:
        print_json(answer)
        return OK
    sys.stdout.write(answer["logs"])
    sys.stdout.flush()
    if not answer["logs"]:
        warn(
            f"no output for job {args.job_id} attempt {answer['attempt']} rank {args.rank}"
            + (f": {answer['note']}" if answer.get("note") else "")
        )
    _say_end(args.job_id, answer)
    return OK


def _say_end(job_id: int, answer: dict[str, Any]) -> None:
    # On stderr, as Slurm's "*** JOB 42 CANCELLED AT ... DUE TO TIME LIMIT ***" ends its output: a log that stops
    # mid-epoch says why, and the output on stdout stays the job's own.
    if answer.get("ended"):
        warn(f"job {job_id} attempt {answer['attempt']} {answer['ended']}")


def _follow(client: Client, args: argparse.Namespace) -> int:
    job = client.job(args.job_id)
    if job["attempt"] == 0 and job["state"] not in TERMINAL_STATES:
        # `muster submit ... && muster logs -f ID` should just work: wait for the job to start.
        warn(f"job {job['id']} is {job['state']}: waiting for it to start (Ctrl-C stops waiting)")
        while job["attempt"] == 0 and job["state"] not in TERMINAL_STATES:
            time.sleep(args.poll)
            job = client.job(args.job_id)
    if job["attempt"] == 0:
        warn(f"job {job['id']} ended {job['state']} without starting: it has no output")
        return OK
    # --tail N: from the last N lines written so far, as `tail -n N -f`; without it, from the start. Each attempt's
    # output is its own (how it ended is said of it on stderr), but a user following a training run follows the job:
    # when it is requeued (preempted, its node lost, a failed attempt within its restarts) the follow goes on to its
    # next attempt, until the job ends. It stopped at the first requeue, with the run going on unseen. -A follows the
    # one attempt asked for, as before.
    attempt = args.attempt or job["attempt"]
    tail = args.tail
    while True:
        for chunk in client.follow_logs(args.job_id, rank=args.rank, attempt=attempt, tail=tail):
            sys.stdout.write(chunk)
            sys.stdout.flush()
        _say_end(args.job_id, client.logs(args.job_id, rank=args.rank, attempt=attempt, tail=1))
        if args.attempt:
            return OK
        job = client.job(args.job_id)
        if job["attempt"] == attempt and job["state"] not in TERMINAL_STATES:
            warn(f"job {job['id']} was requeued: waiting for attempt {attempt + 1} to start (Ctrl-C stops waiting)")
            while job["attempt"] == attempt and job["state"] not in TERMINAL_STATES:
                time.sleep(args.poll)
                job = client.job(args.job_id)
        if job["attempt"] == attempt:
            return OK  # the job has ended, with this attempt: its end was said above
        # The next one, not the latest: an attempt that came and went meanwhile is read too (kept, it is read once).
        attempt, tail = attempt + 1, None
        warn(f"following job {job['id']} attempt {attempt}")


def wait(args: argparse.Namespace) -> int:
    client = client_for(args)
    args.job_id = resolve(client, args.job_id)
    live = sys.stderr.isatty()
    last: tuple[Any, ...] | None = None

    def progress(job: dict[str, Any]) -> None:
        nonlocal last
        if args.quiet or job["state"] in TERMINAL_STATES:
            return
        line = render.progress_line(job)
        if live:
            sys.stderr.write(f"\r\033[K{line}")
            sys.stderr.flush()
            last = ()
            return
        # Not a terminal (a CI log): a new line when the job moves, not for every tick of its clocks.
        moved = (job["state"], job.get("queue_position"), render.reason(job), job.get("attempt"))
        if moved != last:
            print(line, file=sys.stderr, flush=True)
            last = moved

    final = client.wait(args.job_id, poll=args.poll, on_update=progress)
    if live and last is not None:
        sys.stderr.write("\r\033[K")
        sys.stderr.flush()
    if args.json:
        print_json(final)
    else:
        exit_code = f" (exit code {final['exit_code']})" if final.get("exit_code") is not None else ""
        reason = f": {final['state_reason']}" if final.get("state_reason") and final["state"] != "SUCCEEDED" else ""
        ran = render.elapsed(final)
        # "CANCELLED after -" read as a broken line for a job cancelled before it was placed.
        out(f"Job {final['id']} {final['state']}{exit_code} {'without starting' if ran == '-' else f'after {ran}'}{reason}")
    return OK if final["state"] == "SUCCEEDED" else JOB_FAILED


def _is_named(job: dict[str, Any], job_id: int, indices: tuple[int, ...] | None) -> bool:
    """As squeue -j and scancel read an id: 42 is job 42 or every element of array 42; 42_7 (indices (7,)) the element of
    index 7 of array 42."""
    array = job.get("array_id")
    if indices is None:
        return job["id"] == job_id or array == job_id
    return array == job_id and job.get("array_index") in indices


def cancel(args: argparse.Namespace) -> int:
    """scancel: jobs by id; an array's id cancels every element of it not ended, `ID_INDEX` / `ID_[INDICES]` some, in one
    request each (a target is (id, indices or None), from cli._cancel_target); the plain jobs all in one request. With
    --name, --user or --state, the jobs that match them (among those named, if any are), all in one request.

    --json prints one answer whatever was named and however it went (CANCEL_JSON): a script reads one shape."""
    if not args.job_ids and args.name is None and not args.user and not args.states:
        raise SpecError("name the jobs to cancel (IDs), or filter them: --name, --user, --state (as scancel)")
    client = client_for(args)
    status = OK
    done: JSON = {"cancelled": [], "ended": [], "not_found": [], "arrays": [], "errors": []}

    def refuse(message: str) -> None:
        nonlocal status
        print(f"muster: error: {message}", file=sys.stderr, flush=True)
        done["errors"].append(message)
        status = REFUSED

    if args.name is not None or args.user or args.states:
        _cancel_matching(client, args, done, refuse)
        if args.json:
            print_json(done)
        return status
    # Each target once, in the order given (`muster cancel 10 10` cancelled 10, then said it had already ended).
    targets = list(dict.fromkeys(args.job_ids))
    plain = [job_id for job_id, indices in targets if indices is None and not _is_array(client, job_id)]
    for job_id, indices in targets:
        if indices is None and job_id in plain:
            if job_id == plain[0]:
                # All in one request: one by one, the nodes the first freed went to the next of the list in the cycle
                # between, which was placed and then cancelled.
                _cancel_many(client, plain, args, done, refuse)
            continue
        try:
            result = client.cancel_array(job_id, indices, reason=args.reason)
        except ApiError as exc:
            if exc.status >= 500:
                raise
            # Several IDs at once: each refusal says which job, once (the server's words mostly name it already).
            which = "" if re.search(rf"\b([Jj]ob|[Aa]rray) {job_id}\b", exc.message) else f"job {job_id}: "
            refuse(f"{which}{exc.message}")
            continue
        cancelled = {job["id"] for job in done["cancelled"]}  # by this command: named again (`4 4_2`), not "ended"
        result["ended"] = [job for job in result["ended"] if job["id"] not in cancelled]
        done["arrays"].append(result)
        done["cancelled"] += result["cancelled"]
        done["ended"] += result["ended"]
        if result["cancelled"] and not args.json:
            out(render.array_cancelled(result, whole=indices is None))
        for problem in render.array_not_cancelled(result, whole=indices is None, asked=len(indices or ())):
            refuse(problem)
    if args.json:
        print_json(done)
    return status


def requeue(args: argparse.Namespace) -> int:
    """scontrol requeue (--hold: requeuehold): each placed or running job named is stopped and waits again in its
    place; an array's id does so to its placed and running elements, `ID_INDEX` / `ID_[INDICES]` to those elements."""
    client = client_for(args)
    status = OK
    for job_id, indices in dict.fromkeys(args.job_ids):
        try:
            plain = indices is None and not _is_array(client, job_id)
            targets = [job_id] if plain else _array_targets(client, job_id, indices, wanted=_PLACED)
            for target in targets:
                job = client.requeue(target, reason=args.reason, hold=args.hold)
                if args.json:
                    print_json(job)
                    continue
                element = f", {job['array_id']}_{job['array_index']}" if job.get("array_id") is not None else ""
                said = f"Requeued job {job['id']} ({job['name']}{element})"
                if args.hold:
                    out(f"{said} and held it: it is not started until `muster release {job['id']}`")
                else:
                    out(f"{said}: its attempt {job['attempt']} was stopped; it waits in the queue again")
        except (ApiError, SpecError) as exc:
            _say_refused(exc, job_id, indices)
            status = REFUSED
    return status


def update(args: argparse.Namespace) -> int:
    """scontrol update: change pending jobs before they start; an array's id updates its pending elements in one
    request, `ID_INDEX` / `ID_[INDICES]` those elements (each must be pending)."""
    changes = {
        key: value
        for key, value in (
            ("name", args.name),
            ("wall_time_seconds", args.time),
            ("priority_class", args.priority_class),
            ("max_restarts", args.max_restarts),
            ("preemptible", args.preemptible),
            ("dependencies", args.dependency),
        )
        if value is not None
    }
    if not changes:
        raise SpecError(
            "nothing to update: give --time, -J/--name, --priority-class, --max-restarts, --preemptible/--no-preemptible or -d/--dependency"
        )
    client = client_for(args)
    status = OK
    for job_id, indices in dict.fromkeys(args.job_ids):
        try:
            if indices is None and not _is_array(client, job_id):
                jobs = [client.update(job_id, changes)]
            else:
                jobs = client.update_array(job_id, changes, indices)["updated"]
        except (ApiError, SpecError) as exc:
            _say_refused(exc, job_id, indices)
            status = REFUSED
            continue
        for job in jobs:
            if args.json:
                print_json(job)
            else:
                element = f", {render.array_element(job)}" if job.get("array_id") is not None else ""
                out(f"Updated job {job['id']} ({job['name']}{element}): {_updated(job, changes)}")
    return status


def _updated(job: JSON, changes: JSON) -> str:
    """What the job asks now, of the fields changed: `wall time 2:00:00, name x`."""
    said: dict[str, Callable[[], str]] = {
        "name": lambda: f"name {job['name']}",
        "wall_time_seconds": lambda: f"wall time {format_duration(job['wall_time_seconds'])}",
        "priority_class": lambda: f"class {job['priority_class']}",
        "max_restarts": lambda: f"max restarts {job['max_restarts']}",
        "preemptible": lambda: "preemptible" if job["preemptible"] else "not preemptible",
        "dependencies": lambda: f"dependencies {_dependencies_now(job, changes['dependencies'])}",
    }
    return ", ".join(said[key]() for key in changes) + "; the next scheduling cycle plans it so"


def _dependencies_now(job: JSON, asked: list[JSON]) -> str:
    """What an updated job waits for: with where each stands, as `muster show` says it; an array's elements come back
    as the list reads them, without their dependencies: said then as they were asked."""
    if not asked:
        return "none"
    if job.get("dependencies"):
        return render.dependencies_line(job["dependencies"])
    return ", ".join(f"{d['type']}:{d['job']}" + (f"_{d['index']}" if d.get("index") is not None else "") for d in asked)


def hold(args: argparse.Namespace) -> int:
    """scontrol hold: each pending job named stays queued but is not started until released; an array's id holds its
    pending elements, `ID_INDEX` / `ID_[INDICES]` some (one request per element)."""
    return _hold_or_release(args, held=True)


def release(args: argparse.Namespace) -> int:
    """scontrol release: each held job named may start from the next cycle; an array's id releases its held elements."""
    return _hold_or_release(args, held=False)


def _hold_or_release(args: argparse.Namespace, *, held: bool) -> int:
    client = client_for(args)
    status = OK
    done: set[int] = set()
    for job_id, indices in dict.fromkeys(args.job_ids):
        try:
            if indices is None and not _is_array(client, job_id):
                targets = [job_id]
            else:
                targets = _array_targets(client, job_id, indices, wanted=_PENDING_UNHELD if held else _HELD)
            for target in targets:
                if target in done:
                    continue
                job = client.hold(target) if held else client.release(target)
                done.add(job["id"])
                if args.json:
                    print_json(job)
                elif held:
                    out(f"Held job {job['id']} ({job['name']}): it is not started until `muster release {job['id']}`")
                else:
                    out(f"Released job {job['id']} ({job['name']}): it may start from the next scheduling cycle")
        except (ApiError, SpecError) as exc:
            _say_refused(exc, job_id, indices)
            status = REFUSED
    return status


def _pending_unheld(job: JSON) -> bool:
    return job["state"] == "PENDING" and (job.get("pending_reason") or {}).get("code") != "HELD"


def _held(job: JSON) -> bool:
    return (job.get("pending_reason") or {}).get("code") == "HELD"


def _placed(job: JSON) -> bool:
    return job["state"] in ("SCHEDULED", "RUNNING")


# What each command applies to of an array's elements, and how its refusal says it when none is: hold, release, requeue.
_PENDING_UNHELD = (_pending_unheld, "pending and not held")
_HELD = (_held, "held")
_PLACED = (_placed, "placed or running")


def _say_refused(exc: ApiError | SpecError, job_id: int, indices: tuple[int, ...] | None = None) -> None:
    """One job's refusal among several named (requeue, update, hold, release), on stderr, naming the job where the
    server's words do not already: as it was named, `4_2` or `4_[1-3]` for an array's elements (`job 4:` read as
    the array's first element, or the whole array, when 4_2 was refused). A server error (5xx) is not a refusal and
    goes on up."""
    if isinstance(exc, ApiError) and exc.status >= 500:
        raise exc
    message = exc.message if isinstance(exc, ApiError) else str(exc)
    named = f"job {job_id}"
    if indices is not None:
        named = f"{job_id}_{indices[0]}" if len(indices) == 1 else f"{job_id}_[{render.index_ranges(indices)}]"
    said = re.search(rf"\b([Jj]ob|[Aa]rray) {job_id}\b|(?<![\w\[]){re.escape(named)}(?![\w\]])", message)
    which = "" if said else f"{named}: "
    print(f"muster: error: {which}{message}", file=sys.stderr, flush=True)


def _array_targets(
    client: Client, array_id: int, indices: tuple[int, ...] | None, *, wanted: tuple[Callable[[JSON], bool], str]
) -> list[int]:
    """The elements of an array a command applies to (those of `indices`, else all), by index: a hold's pending ones,
    a release's held ones, a requeue's placed or running ones (`wanted`: which, and its words)."""
    elements = {job["array_index"]: job for job in client.jobs(array=array_id)}
    if not elements:
        raise SpecError(f"No array {array_id} (or none that you may see).")
    if indices is not None and (missing := sorted(set(indices) - set(elements))):
        raise SpecError(f"Array {array_id} has no element {', '.join(map(str, missing))}; nothing was done.")
    asked = [elements[i] for i in sorted(indices if indices is not None else elements)]
    applies, words = wanted
    targets = [job["id"] for job in asked if applies(job)]
    if not targets:
        raise SpecError(f"Array {array_id}: no element asked for is {words}; nothing was done.")
    return targets


def _cancel_many(client: Client, job_ids: list[int], args: argparse.Namespace, done: JSON, refuse: Callable[[str], None]) -> None:
    """The plain jobs of a `muster cancel`, in one request: each cancelled said as `Cancelled job 12 (train)`, each left
    out (ended, or no job you may see) an error; all of it added to `done`, the command's --json answer."""
    result = client.cancel_many(job_ids, reason=args.reason)
    done["cancelled"] += result["cancelled"]
    done["ended"] += result["ended"]
    done["not_found"] += result["not_found"]
    if not args.json:
        for job in result["cancelled"]:
            out(render.job_cancelled(job))
    for job in result["ended"]:
        refuse(f"Job {job['id']} has already ended ({job['state']}); there is nothing to cancel.")
    for job_id in result["not_found"]:
        refuse(f"No job {job_id} (or none that you may see).")


# The most jobs one `POST /api/v1/jobs/cancel-many/` takes (api.jobs.serializers.CANCEL_MANY_MAX).
CANCEL_MANY = 1000


def _cancel_matching(client: Client, args: argparse.Namespace, done: JSON, refuse: Callable[[str], None]) -> None:
    """scancel -n NAME / -u USER / -t STATE [ID...]: the jobs not ended that match every filter given (and are named, if
    ids are), cancelled in one request. Without --user only your own: an admin's `muster cancel -n test` must not stop
    every user's job of that name."""
    states = [state for group in args.states or [] for state in group] or ["PENDING", "SCHEDULED", "RUNNING"]
    me = str(client.usage()["user"]["name"])
    owner = args.user or me
    # The server's name filter matches a part of the name, in any case: scancel -n matches the whole name.
    try:
        found = list(client.jobs(state=states, owner=owner, name=args.name or None))
    except ApiError as exc:
        if exc.status != 400 or not isinstance(exc.body, dict) or "owner" not in exc.body:
            raise
        # The job list's refusal of ?owner= spoke of listing ("You can list only your own jobs"): said as a cancel.
        raise ApiError(exc.status, _owner_refused(owner, me, exc.body["owner"]), exc.body) from None
    targets = list(dict.fromkeys(args.job_ids))

    def chosen_by(job: JSON) -> bool:
        return (args.name is None or job["name"] == args.name) and (
            not targets or any(_is_named(job, job_id, indices) for job_id, indices in targets)
        )

    chosen = [job["id"] for job in found if chosen_by(job)]
    if chosen:
        # The server cancels at most CANCEL_MANY jobs a request (`muster cancel -n bulk` of 1,020 cancelled none):
        # each request is a transaction of its own.
        ordered = sorted(chosen)
        for first in range(0, len(ordered), CANCEL_MANY):
            _cancel_many(client, ordered[first : first + CANCEL_MANY], args, done, refuse)
    whose = "of yours" if owner == me else f"of {owner}'s"

    def why_not(job: JSON) -> str:
        """Why a job named on the command line was left by the filters, in the filters' words."""
        if job["state"] in TERMINAL_STATES:
            return f"ended already ({job['state']})"
        if job["state"] not in states:
            return f"{STATE_WORDS.get(job['state'], job['state'].lower())}, not {_states_words(states)} (-t)"
        if job["owner"] != owner:
            mine = "without -u only your own are cancelled" if args.user is None else f"not {owner}'s (-u)"
            return f"{job['owner']}'s, and {mine}"
        return f"named {job['name']}, not {args.name} (-n)"

    if targets:
        # `scancel -n arr2 14_9` cancels 14_9 only if it is named arr2. Each job named but left out is said, and why
        # (`muster cancel -n arr2 14_9` of an element named arr said "no ... job of yours named arr2 among jobs
        # 14_[9]", and with another id that matched, nothing of it at all).
        _say_left_out(client, targets, set(chosen), why_not, refuse)
        if not chosen:
            print("muster: nothing was cancelled.", file=sys.stderr, flush=True)
        return
    if chosen:
        return
    # In words, not flags: `no job matches --user root --state PENDING,SCHEDULED,RUNNING` named states nobody asked for.
    named = f" named {args.name}" if args.name is not None else ""
    others = ""
    if args.user is None:
        # An admin's `muster cancel -n sweep` looks at their own jobs only, and says whose match (the job list shows an
        # admin everyone's; anyone else's list, only their own, finds none here).
        theirs = [job for job in client.jobs(state=states, name=args.name or None) if job["owner"] != me and chosen_by(job)]
        if theirs:
            owners = sorted({job["owner"] for job in theirs})
            matching = f"{render.plural(len(theirs), 'job')} of {' and '.join(owners)} match"
            others = f" ({matching}, but without -u only your own are cancelled: -u {owners[0]} for {owners[0]}'s)"
    print(f"muster: no {_states_words(states)} job {whose}{named}; nothing was cancelled{others}.", file=sys.stderr, flush=True)


def _say_left_out(
    client: Client,
    targets: list[tuple[int, tuple[int, ...] | None]],
    chosen: set[int],
    why_not: Callable[[JSON], str],
    refuse: Callable[[str], None],
) -> None:
    """For `muster cancel` with filters and ids: each job named (an id, an array's id, `ID_INDEX`, `ID_[INDICES]`)
    that the filters left out, on stderr with why (an array's elements left out for the same reason on one line, as
    scancel names them: `jobs 14_[0-8,10]`); an id that names no job you may see is refused, as without filters.
    Each job is said once, however often it is named (`14 14_9`)."""
    said: set[int] = set()
    for job_id, indices in targets:
        jobs = list(client.jobs(array=job_id))
        if indices is not None:
            jobs = [job for job in jobs if job.get("array_index") in indices]
            for index in sorted(set(indices) - {job["array_index"] for job in jobs}):
                refuse(_no_element(job_id, index).message)
        elif not jobs:
            try:
                jobs = [client.job(job_id)]
            except ApiError as exc:
                if exc.status != 404:
                    raise
                refuse(f"No job {job_id} (or none that you may see).")
        groups: dict[str, list[JSON]] = {}
        for job in sorted(jobs, key=lambda job: job["id"]):
            if job["id"] not in chosen and job["id"] not in said:
                said.add(job["id"])
                groups.setdefault(why_not(job), []).append(job)
        for why, left in groups.items():
            if len(left) == 1 or left[0].get("array_id") is None:
                for job in left:
                    which = render.array_element(job) or job["name"]
                    print(f"muster: job {job['id']} ({which}) was not cancelled: {why}.", file=sys.stderr, flush=True)
            else:
                elements = f"{job_id}_[{render.index_ranges(job['array_index'] for job in left)}]"
                print(f"muster: jobs {elements} were not cancelled: {why}.", file=sys.stderr, flush=True)


STATE_WORDS = {"PENDING": "pending", "SCHEDULED": "starting", "RUNNING": "running"}


def _states_words(states: list[str]) -> str:
    """`pending`, `pending or running`, `pending, starting or running`: the states a cancel by filter looked at."""
    words = [STATE_WORDS.get(state, state.lower()) for state in dict.fromkeys(states)]
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} or {words[-1]}"


def _owner_refused(owner: str, me: str, refusal: Any) -> str:
    """Why `muster cancel -u OWNER` looked at nothing: someone else's jobs asked by a user who is no admin (only an
    admin may cancel them), or a user no job belongs to (the server names those there are)."""
    said = " ".join(map(str, refusal)) if isinstance(refusal, list) else str(refusal)
    if "only your own" in said:  # api.jobs.filters.unknown_owner's answer to anyone but an admin
        return f"you may cancel only your own jobs (you are {me}), not {owner}'s: only an admin may; nothing was cancelled."
    return f"{said.rstrip('.')}; nothing was cancelled."


def _is_array(client: Client, job_id: int) -> bool:
    """Whether `job_id` is an array's id (its first element's), as `scancel 42` reads it: the array, not one job."""
    return next(client.jobs(array=job_id, limit=1), None) is not None


def checkpoint(args: argparse.Namespace) -> int:
    in_job = os.environ.get("MUSTER_JOB_ID", "")
    job_id = args.job_id if args.job_id is not None else int(in_job) if in_job.isdigit() else None
    if job_id is None:
        raise SpecError("give the job's ID (inside a job, MUSTER_JOB_ID gives it)")
    ours = in_job == str(job_id)
    attempt = os.environ.get("MUSTER_ATTEMPT", "")
    client = (_client_in_job(args) if ours else None) or client_for(args)
    result = client.checkpoint(job_id, step=args.step, at=args.at, attempt=int(attempt) if ours and attempt.isdigit() else None)
    if args.json:
        print_json(result)
    else:
        step = f", step {result['checkpoint_step']}" if result.get("checkpoint_step") is not None else ""
        kept = "" if result.get("recorded") else " (already reported, or a later one was)"
        out(f"Job {result['job']} attempt {result['attempt']}: last checkpoint {render.when(result['checkpointed_at'])}{step}{kept}")
    return OK


def _client_in_job(args: argparse.Namespace) -> Client | None:
    """Inside the job, unless flags or MUSTER_TOKEN name a login: its own token, to where its pods report."""
    url, token = os.environ.get("MUSTER_CHECKPOINT_URL", ""), os.environ.get("MUSTER_TELEMETRY_TOKEN", "")
    if not (url and token) or getattr(args, "url", None) or getattr(args, "token", None) or os.environ.get("MUSTER_TOKEN"):
        return None
    return Client(url.split("/api/v1/", 1)[0], token)


def usage(args: argparse.Namespace) -> int:
    team = getattr(args, "team", None)
    if team is not None and not getattr(args, "all_accounts", False):
        raise SpecError(f"--team picks the accounts of --all: muster usage --all --team {team}")
    if getattr(args, "all_accounts", False):
        return _usage_all(args, team)
    summary = client_for(args).usage()
    if args.json:
        print_json(summary)
    else:
        out(render.usage_text(summary))
    return OK


def _usage_all(args: argparse.Namespace, team: str | None) -> int:
    """sreport's cluster AccountUtilizationByUser for the current period: every account's use, as its own usage says."""
    try:
        found = client_for(args).usage_all(team=team)
    except AuthError as exc:
        if not str(exc).startswith("not allowed"):
            raise
        admins = "not allowed: muster usage --all lists every account's usage, for admins only; yours and your teams': muster usage"
        raise AuthError(admins) from None
    if args.json:
        print_json(found)
    else:
        out(render.usage_all_text(found["users"], found["teams"]))
    return OK


MAINT_ONLY = ("start", "duration", "end", "list_windows", "cancel")


def nodes(args: argparse.Namespace) -> int:
    action, names, reason = getattr(args, "action", None), getattr(args, "names", []), getattr(args, "reason", None)
    given = [f"--{name.replace('list_windows', 'list')}" for name in MAINT_ONLY if getattr(args, name, None)]
    if action != "maint" and given:
        raise SpecError(f"{', '.join(given)} {'is' if len(given) == 1 else 'are'} for maintenance: muster nodes maint ...")
    if action is None and (names or reason):
        raise SpecError("to hold or release nodes, say which: muster nodes hold NODE... -r REASON, muster nodes release NODE...")
    if action == "maint":
        return _nodes_maint(args, names, reason)
    if action is not None:
        return _nodes_hold_or_release(args, action, names, reason)
    client = client_for(args)
    found = client.nodes()
    if args.json:
        print_json(found)
    else:
        out(render.nodes_text(found))
        _warn_if_unusable(client)
    return OK


def _nodes_hold_or_release(args: argparse.Namespace, action: str, names: list[str], reason: str | None) -> int:
    """scontrol update NodeName=... State=DRAIN Reason=... / State=RESUME: one request, all the nodes or none."""
    if not names:
        raise SpecError(f"name the nodes to {action}: muster nodes {action} gpu-07 gpu-08" + (" -r REASON" if action == "hold" else ""))
    if action == "hold" and not (reason or "").strip():
        raise SpecError("say why the nodes are held (-r REASON): users whose jobs wait for them read it")
    if action == "release" and reason:
        raise SpecError("a release takes no reason (-r is for hold)")
    try:
        # As squeue's NODELIST and muster queue write them: `gpu-[01-04]` copied from there names those four nodes.
        names = list(dict.fromkeys(name for text in names for name in render.hostlist_names(text)))
    except ValueError as exc:
        raise SpecError(str(exc)) from exc
    client = client_for(args)
    done = client.nodes_hold(names, reason or "") if action == "hold" else client.nodes_release(names)
    if args.json:
        print_json(done)
    elif action == "hold":
        out(done["message"])
    else:
        if done["released"]:
            out(f"Released {', '.join(done['released'])}: new work may be placed there again (failure count reset).")
        if done["not_held"]:
            warn(f"not held, left as they were: {', '.join(done['not_held'])}")
    return OK


def parse_moment(text: str, *, now: datetime | None = None) -> datetime:
    """A time as --start and --end take it: `now`, or an ISO 8601 date and time (`2026-11-28 18:00`, `2026-11-28T18:00Z`),
    local unless it says its zone, as --since reads a date."""
    if text.strip().lower() == "now":
        return now or datetime.now(timezone.utc)
    try:
        moment = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text)
    except ValueError:
        raise SpecError(f"'{text}' is not a time: write it as 2026-11-28 18:00 (local), 2026-11-28T18:00Z, or now") from None
    return moment if moment.tzinfo else moment.astimezone()


def _nodes_maint(args: argparse.Namespace, names: list[str], reason: str | None) -> int:
    """scontrol create reservation flags=maint (--list: show reservation; --cancel: delete reservation)."""
    modes = [m for m, on in (("--list", args.list_windows), ("--cancel", args.cancel is not None)) if on]
    scheduling = bool(names or reason or args.start or args.duration or args.end)
    if len(modes) > 1 or (modes and scheduling):
        raise SpecError(
            f"{' and '.join(modes) if len(modes) > 1 else modes[0]} take{'' if len(modes) > 1 else 's'} nothing else: "
            "muster nodes maint --list, muster nodes maint --cancel ID"
        )
    if modes == ["--list"]:
        client = client_for(args)
        windows = client.maintenance()
        if args.json:
            print_json(windows)
        else:
            out(render.maintenance_table(windows))
        return OK
    if modes == ["--cancel"]:
        client = client_for(args)
        done = client.maintenance_cancel(args.cancel)
        if args.json:
            print_json(done)
        else:
            out(f"Cancelled maintenance window {done['id']} of {done['nodelist']}: the nodes take work as before.")
        return OK
    if not names:
        raise SpecError("name the nodes: muster nodes maint 'gpu-[07-08]' --start '2026-11-28 18:00' --duration 8h -r REASON")
    if not (reason or "").strip():
        raise SpecError("say why the nodes go into maintenance (-r REASON): users whose jobs wait for them read it")
    if not args.start:
        raise SpecError("say when it starts: --start '2026-11-28 18:00' (local time), or --start now")
    if bool(args.duration) == bool(args.end):
        raise SpecError("say how long it lasts, --duration 8h, or when it ends, --end '2026-11-29 02:00': one of them")
    try:
        names = list(dict.fromkeys(name for text in names for name in render.hostlist_names(text)))
    except ValueError as exc:
        raise SpecError(str(exc)) from exc
    start = parse_moment(args.start)
    body: dict[str, Any] = {"nodes": names, "start": start.isoformat(), "reason": reason}
    if args.duration:
        body["duration_seconds"] = parse_wall_time(args.duration)
    else:
        body["end"] = parse_moment(args.end).isoformat()
    client = client_for(args)
    window = client.maintenance_create(body)
    if args.json:
        print_json(window)
        return OK
    out(
        f"Maintenance window {window['id']}: {window['nodelist']} from {render.stamp(window['start'])} to "
        f"{render.stamp(window['end'])} ({window['reason']}). Until then only jobs that end by its start are started "
        "there; at its end the nodes take work again by themselves."
    )
    if window.get("running"):
        running = "; ".join(
            f"{node}: {'job' if len(ids) == 1 else 'jobs'} {', '.join(map(str, ids))}" for node, ids in window["running"].items()
        )
        warn(f"jobs running there now, which run on if still there at the start: {running}")
    return OK


def _warn_if_unusable(client: Client, cluster: dict[str, Any] | None = None) -> None:
    """What every page's banner says when jobs cannot start on the cluster (unreachable, no namespace, no rights)."""
    cluster = client.cluster() if cluster is None else cluster
    if not cluster.get("usable", True):
        since = f" (since {render.when(cluster['since'])})" if cluster.get("since") else ""
        warn(f"jobs cannot start on the cluster now{since}: {cluster.get('problem') or 'it cannot be reached'}")
