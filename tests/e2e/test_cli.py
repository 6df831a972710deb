"""The `muster` command and the Python client against a real server: what a researcher types, what they see, the exit codes.

Everything is real and separate from the test process: gunicorn serving the API, a Celery worker and beat on the
embedded broker (a spool directory of the test's own) moving jobs on a simulated 2 x 8-GPU cluster, all on the
test database. The CLI runs as a subprocess with its own config directory, as a user's shell would run it.
"""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import requests
from muster_client import Client

from jobs.models import Job, SimulatedPod
from telemetry.tokens import telemetry_token_for_job
from tests.conftest import PASSWORD
from tests.live_server import free_port, start_gunicorn
from tests.processes import Processes, wait_for

pytestmark = [pytest.mark.worker, pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

IMAGE = "nvcr.io/nvidia/pytorch:24.05-py3"
WORKER_ARGS = ("worker", "--loglevel", "INFO", "--concurrency", "1", "--without-gossip", "--without-mingle", "--without-heartbeat")


@dataclass
class Stack:
    url: str
    procs: Processes
    home: Path
    env: dict[str, str] = field(default_factory=dict)

    def muster(self, *args: str, env: dict[str, str] | None = None, timeout: float = 90) -> subprocess.CompletedProcess[str]:
        """Run `muster ARGS` as a user's shell would; returns its exit code, stdout and stderr."""
        return subprocess.run(
            [sys.executable, "-m", "muster_client", *args], env={**self.env, **(env or {})}, capture_output=True, text=True, timeout=timeout
        )

    def popen(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "muster_client", *args], env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )

    def login(self) -> None:
        done = self.muster("login", self.url, "--username", "researcher", env={"MUSTER_PASSWORD": PASSWORD})
        assert done.returncode == 0, done.stderr

    def start_scheduler(self) -> None:
        self.procs.start(*WORKER_ARGS)
        self.procs.start("beat", "--loglevel", "INFO", "--schedule", str(self.procs.tmp_path / "beat-schedule"))


SQUEUE_HEADER = ["ID", "NAME", "USER", "STATE", "NODESxGPUS", "POS", "PRIORITY", "TIME", "TIME_LEFT", "START", "NODELIST(REASON)"]


@pytest.fixture
def stack(require_postgres: None, tmp_path: Path, settings: Any, django_user_model: Any) -> Iterator[Stack]:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]  # what gunicorn's settings check
    django_user_model.objects.create_user(username="researcher", password=PASSWORD)
    procs = Processes(tmp_path)
    # The embedded broker in this test's data dir: no other test's worker can take this test's cycles.
    procs.env.update(
        {
            "REDIS_URL": "",
            "MUSTER_SIM_NODES": "2",
            "MUSTER_SIM_SHARED_NODES": "time-slicing:4:1",
            "MUSTER_SIM_DEFAULT_DURATION_SECONDS": "3",
            "MUSTER_THROTTLE_WRITES": "",
            "MUSTER_THROTTLE_TOKEN_REQUESTS": "",
        }
    )
    for name in ("CELERY_BROKER_URL", "MUSTER_REQUIRE_SERVICES"):
        procs.env.pop(name, None)
    web, api = start_gunicorn(procs.env, tmp_path / "web.log")
    procs.procs.append((web, tmp_path / "web.log"))
    home = tmp_path / "home"
    cli_env = {k: v for k, v in os.environ.items() if not k.startswith("MUSTER_")}
    cli_env.update({"XDG_CONFIG_HOME": str(home / ".config"), "HOME": str(home), "COLUMNS": "200"})
    try:
        yield Stack(url=api.base, procs=procs, home=home, env=cli_env)
    except BaseException:
        print(procs.logs())
        raise
    finally:
        procs.stop()


def write_yaml(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def job_row(job_id: int) -> Job:
    return Job.objects.get(pk=job_id)


def test_a_researchers_day_login_submit_queue_why_logs_wait_cancel_usage(stack: Stack, tmp_path: Path) -> None:
    assert (Path(sys.executable).parent / "muster").exists(), "the console script is installed in the virtualenv"
    stack.login()
    config = stack.home / ".config" / "muster" / "config.json"
    assert config.stat().st_mode & 0o777 == 0o600
    stack.start_scheduler()

    # A dry run says it fits and queues nothing.
    big_yaml = write_yaml(
        tmp_path,
        "big.yaml",
        f"name: big\nimage: {IMAGE}\ncommand: torchrun --nproc-per-node 8 train.py\nnodes: 2\ngpus_per_node: 8\n"
        "wall_time_seconds: 10m\nsimulate: {duration_seconds: 13}\n",
    )
    dry = stack.muster("submit", big_yaml, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.startswith("Would submit:\n  name: big\n  image: ")
    assert "It fits the cluster and your limits: 1 job would be queued. Nothing was submitted." in dry.stdout
    assert Job.objects.count() == 0

    # From YAML: the whole cluster for 13 s.
    done = stack.muster("submit", big_yaml)
    assert done.returncode == 0, done.stderr
    big = Job.objects.get(name="big")
    assert done.stdout.startswith(f"Submitted job {big.pk} (big): PENDING")
    assert (big.nodes, big.gpus_per_node, big.wall_time_seconds) == (2, 8, 600)
    assert big.command == ["torchrun", "--nproc-per-node", "8", "train.py"]

    # From flags, with the command after --: it waits behind the first.
    flags = ["-N", "1", "-G", "4", "-t", "5m", "--image", IMAGE, "-J", "flagged", "-e", "FOO=bar", "--json"]
    done = stack.muster("submit", *flags, "--", "python", "train.py", "--lr", "3e-4")
    assert done.returncode == 0, done.stderr
    flagged = json.loads(done.stdout)
    assert (flagged["name"], flagged["command"], flagged["wall_time_seconds"], flagged["env"]) == (
        "flagged",
        ["python", "train.py", "--lr", "3e-4"],
        300,
        {"FOO": "bar"},
    )

    wait_for(lambda: job_row(big.pk).state == "RUNNING", 30, "the big job to run")
    # Follow its output from now on, noting when each line arrives.
    follow = stack.popen("logs", "-f", str(big.pk))
    arrived: list[tuple[float, str]] = []

    def read() -> None:
        for line in follow.stdout or []:
            arrived.append((time.time(), line))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    wait_for(lambda: job_row(flagged["id"]).queue_position == 1, 30, "a cycle to place the flagged job first in the queue")

    # `muster wait` on the waiting job shows its place in the queue, then its run, and exits 0 when it succeeds.
    waiter = stack.popen("wait", str(flagged["id"]), "--poll", "0.5")

    queue = stack.muster("queue")
    assert queue.returncode == 0, queue.stderr
    header, row = queue.stdout.splitlines()[:2]
    assert header.split() == SQUEUE_HEADER
    assert row.split()[:6] == [str(flagged["id"]), "flagged", "researcher", "PENDING", "1x4", "1"]
    reason = job_row(flagged["id"]).pending_reason_code
    assert reason and f"({reason})" in row
    assert queue.stdout.splitlines()[-1].startswith("1 pending")
    if job_row(big.pk).state == "RUNNING":  # still running after the call, so running during it: listed, as squeue does
        big_row = next(line for line in queue.stdout.splitlines() if line.startswith(f"{big.pk} "))
        assert big_row.split()[3] == "RUNNING" and big_row.endswith("sim-node-[000-001]")
    queue_json = json.loads(stack.muster("queue", "--json").stdout)
    assert [e["id"] for e in queue_json["results"]] == [flagged["id"]]
    pending_only = stack.muster("queue", "--start")
    assert [line.split()[0] for line in pending_only.stdout.splitlines()[1:-1]] == [str(flagged["id"])]

    why = stack.muster("why", str(flagged["id"]))
    assert why.returncode == 0, why.stderr
    assert why.stdout.startswith(f"Job {flagged['id']} (flagged) is PENDING: ")
    assert "Position 1 in the queue." in why.stdout
    assert "FACTOR" in why.stdout and "fair_share" in why.stdout and "age" in why.stdout

    show = stack.muster("show", str(big.pk))
    assert show.returncode == 0, show.stderr
    assert "state           RUNNING" in show.stdout
    assert "nodes           sim-node-[000-001]" in show.stdout
    assert json.loads(stack.muster("show", str(big.pk), "--json").stdout)["state"] == "RUNNING"

    running = stack.muster("jobs", "--state", "running")
    assert running.returncode == 0, running.stderr
    assert [line.split()[0] for line in running.stdout.splitlines()[1:]] == [str(big.pk)]
    pending = json.loads(stack.muster("jobs", "--state", "PENDING,SCHEDULED", "--json").stdout)
    assert [j["id"] for j in pending] == [flagged["id"]]

    # The follow ends by itself when the job does, with every line once; the step line came while the job still ran.
    follow.wait(timeout=60)
    reader.join(timeout=10)
    assert follow.returncode == 0, follow.stderr.read() if follow.stderr else ""
    lines = [line for _, line in arrived]
    assert lines[0].startswith(f"[simulated cluster] no container runs: job {big.pk} attempt 1 rank 0")
    assert lines[1:] == [
        "$ torchrun --nproc-per-node 8 train.py\n",
        "step 100 (10 s of 13 s)\n",
        "[simulated cluster] exited with code 0 after 13 s\n",
    ]
    finished_at = job_row(big.pk).finished_at
    assert finished_at is not None and arrived[2][0] < finished_at.timestamp()

    wait_big = stack.muster("wait", str(big.pk))
    assert wait_big.returncode == 0
    assert wait_big.stdout.startswith(f"Job {big.pk} SUCCEEDED (exit code 0) after ")

    # After the end the output is still there, kept when the pods went.
    logs = stack.muster("logs", str(big.pk))
    assert logs.returncode == 0, logs.stderr
    assert logs.stdout.startswith(f"[simulated cluster] no container runs: job {big.pk} attempt 1 rank 0")
    assert "step 100 (10 s of 13 s)\n" in logs.stdout
    kept = json.loads(stack.muster("logs", str(big.pk), "--rank", "1", "--json").stdout)
    assert (kept["source"], kept["rank"], kept["attempt"]) == ("stored", 1, 1)

    out, err = waiter.communicate(timeout=60)
    assert waiter.returncode == 0, err
    assert out.startswith(f"Job {flagged['id']} SUCCEEDED (exit code 0) after ")
    assert f"job {flagged['id']} PENDING  position 1  reason {reason}" in err
    assert f"job {flagged['id']} RUNNING" in err

    # Cancel a long job; cancelling it again is refused with the server's reason.
    long = json.loads(stack.muster("submit", "-G", "8", "-t", "1h", "--image", IMAGE, "--json", "--", "sleep", "infinity").stdout)
    assert long["name"] == "sleep"
    cancelled = stack.muster("cancel", str(long["id"]))
    assert (cancelled.returncode, cancelled.stdout) == (0, f"Cancelled job {long['id']} (sleep)\n")
    again = stack.muster("cancel", str(long["id"]))
    assert again.returncode == 5
    assert again.stderr == f"muster: error: Job {long['id']} has already ended (CANCELLED); there is nothing to cancel.\n"
    assert [j["id"] for j in json.loads(stack.muster("jobs", "--state", "CANCELLED", "--json").stdout)] == [long["id"]]

    usage = stack.muster("usage")
    assert usage.returncode == 0, usage.stderr
    assert usage.stdout.startswith("Budget period ")
    assert "user researcher" in usage.stdout
    assert json.loads(stack.muster("usage", "--json").stdout)["username"] == "researcher"

    # A quarter of a GPU, Run:ai's habit: one node, one GPU's slice, on the node whose GPUs are time-sliced.
    (tmp_path / "eval.yaml").write_text("simulate: {duration_seconds: 600}\n")
    quarter = stack.muster(
        "submit", str(tmp_path / "eval.yaml"), "--gpu-fraction", "0.25", "-t", "1h", "--image", IMAGE, "--json", "--", "python", "eval.py"
    )
    assert quarter.returncode == 0, quarter.stderr
    sliced = json.loads(quarter.stdout)
    assert (sliced["nodes"], sliced["gpus_per_node"], sliced["gpu_fraction"]) == (1, 1, 0.25)
    wait_for(lambda: Job.objects.get(pk=sliced["id"]).state == "RUNNING", timeout=60, what="the GPU slice job running")
    nodes = stack.muster("nodes")
    assert nodes.returncode == 0, nodes.stderr
    # As the cluster page says it: the shared node's free shares apart from the whole GPUs (it takes slices only).
    summary = "3 nodes, 16 of 16 GPUs free for whole-GPU jobs; on 1 shared node (GPU slices only), 7.75 of 8 GPUs free"
    assert nodes.stdout.splitlines()[-1] == summary
    shared_line = next(line for line in nodes.stdout.splitlines() if line.startswith("sim-time-slicing-000"))
    assert "7.75/8" in shared_line and "time-slicing 31 of 32 slices free, 0.25 GPU each" in shared_line
    assert [n["name"] for n in json.loads(stack.muster("nodes", "--json").stdout)] == [
        "sim-node-000",
        "sim-node-001",
        "sim-time-slicing-000",
    ]
    refused = stack.muster("submit", "--gpu-fraction", "0.25", "--gpu-isolation", "-t", "1h", "--image", IMAGE, "--", "python", "eval.py")
    assert refused.returncode != 0
    assert "No node offers a slice of at least 0.25 GPU, isolated (MIG). Shared here: time-slicing slices of 0.25 GPU" in refused.stderr
    assert stack.muster("cancel", str(sliced["id"])).returncode == 0
    # sbatch's -N MIN-MAX: an elastic job, its nodes its most.
    elastic = stack.muster("submit", "-N", "1-2", "-G", "8", "-t", "1h", "--image", IMAGE, "--json", "--", "torchrun", "train.py")
    assert elastic.returncode == 0, elastic.stderr
    ranged = json.loads(elastic.stdout)
    assert (ranged["min_nodes"], ranged["max_nodes"], ranged["nodes"]) == (1, 2, 2)
    assert stack.muster("cancel", str(ranged["id"])).returncode == 0


def test_an_array_sweep_and_a_failing_job_whose_every_attempt_keeps_its_logs(stack: Stack, tmp_path: Path) -> None:
    stack.login()
    stack.start_scheduler()
    sweep = write_yaml(
        tmp_path,
        "sweep.yaml",
        f"image: {IMAGE}\ncommand: [python, sweep.py]\ngpus_per_node: 2\nwall_time_seconds: 300\nsimulate: {{duration_seconds: 6}}\n",
    )
    done = stack.muster("submit", sweep, "--array", "0-3")
    assert done.returncode == 0, done.stderr
    elements = list(Job.objects.filter(name="sweep").order_by("array_index"))
    assert [j.array_index for j in elements] == [0, 1, 2, 3]
    array_id = elements[0].array_id
    assert done.stdout == f"Submitted array {array_id}: 4 jobs, {elements[0].pk} to {elements[-1].pk} (muster jobs --array {array_id})\n"
    listed = json.loads(stack.muster("jobs", "--array", str(array_id), "--json").stdout)
    assert sorted(j["array_index"] for j in listed) == [0, 1, 2, 3]
    # A list cut short says so, on stderr; one that shows every job does not.
    two = stack.muster("jobs", "--limit", "2")
    assert len(two.stdout.splitlines()) == 3  # the header and two rows
    assert two.stderr == "muster: showing the newest 2; there are more (--limit N for more, --limit 0 for all).\n"
    every = stack.muster("jobs", "--limit", "4")
    assert len(every.stdout.splitlines()) == 5 and every.stderr == ""

    # Each element runs with its index in its environment (the simulated pods keep theirs).
    ids = [j.pk for j in elements]
    wait_for(lambda: SimulatedPod.objects.filter(job_id__in=ids).count() == 4, 30, "every element to be launched")
    env = {pod.job_id: pod.env for pod in SimulatedPod.objects.filter(job_id__in=ids)}
    assert [env[j.pk]["MUSTER_ARRAY_INDEX"] for j in elements] == ["0", "1", "2", "3"]
    assert {env[j.pk]["MUSTER_ARRAY_ID"] for j in elements} == {str(array_id)}

    # A job that exits 3 on every attempt, restarted once: `wait` exits 1, and both attempts' output stays readable.
    failing = write_yaml(
        tmp_path,
        "failing.yaml",
        f"image: {IMAGE}\ncommand: python crash.py\ngpus_per_node: 8\nwall_time_seconds: 5m\nmax_restarts: 1\n"
        "simulate: {duration_seconds: 1, exit_code: 3}\n",
    )
    job = json.loads(stack.muster("submit", failing, "--json").stdout)
    waited = stack.muster("wait", str(job["id"]), "--poll", "0.5")
    assert waited.returncode == 1, waited.stderr
    assert waited.stdout.startswith(f"Job {job['id']} FAILED (exit code 3) after ")
    assert "Attempt 2 failed" in waited.stdout
    first = stack.muster("logs", str(job["id"]), "--attempt", "1")
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith(f"[simulated cluster] no container runs: job {job['id']} attempt 1 rank 0")
    assert first.stdout.endswith("exited with code 3 after 1 s\n")
    latest = stack.muster("logs", str(job["id"]))
    assert f"job {job['id']} attempt 2 rank 0" in latest.stdout
    show = stack.muster("show", str(job["id"]))
    assert "logs            attempt 1: ranks 0; attempt 2: ranks 0" in show.stdout
    assert "restarts 1 of 1" in show.stdout


def test_a_job_reports_its_checkpoints_from_inside_with_nothing_but_its_pod_environment(stack: Stack, tmp_path: Path) -> None:
    stack.login()
    # Running for ten minutes, not the stack's default 3 s: the checks below take a few CLI runs.
    long = write_yaml(tmp_path, "ckpt.yaml", "simulate: {duration_seconds: 600}\n")
    done = stack.muster("submit", long, "--image", IMAGE, "-N", "1", "-G", "8", "-t", "1:00:00", "-J", "ckpt", "--json", "--", "train.py")
    assert done.returncode == 0, done.stderr
    job_id = json.loads(done.stdout)["id"]
    early = stack.muster("checkpoint", str(job_id))  # no scheduler yet: it waits
    assert early.returncode == 5 and early.stderr.strip().endswith(f"Job {job_id} is PENDING: only a running job reports checkpoints.")
    stack.start_scheduler()
    wait_for(lambda: job_row(job_id).state == "RUNNING", 30, "the job to run")

    # Inside the job: no login, no flags; a fresh home with no config, as in a container.
    pod_env = {
        "HOME": str(stack.home / "pod"),
        "XDG_CONFIG_HOME": str(stack.home / "pod" / ".config"),
        "MUSTER_JOB_ID": str(job_id),
        "MUSTER_ATTEMPT": "1",
        "MUSTER_CHECKPOINT_URL": f"{stack.url}/api/v1/jobs/{job_id}/checkpoint/",
        "MUSTER_TELEMETRY_TOKEN": telemetry_token_for_job(job_id),
    }
    inside = stack.muster("checkpoint", "--step", "4000", env=pod_env)
    assert inside.returncode == 0, inside.stderr
    assert inside.stdout.startswith(f"Job {job_id} attempt 1: last checkpoint ") and inside.stdout.endswith(", step 4000\n")
    job = job_row(job_id)
    assert (job.checkpoint_step, job.checkpoint_attempt) == (4000, 1) and job.checkpointed_at is not None
    stale = stack.muster("checkpoint", "--step", "1", env={**pod_env, "MUSTER_ATTEMPT": "2"})
    assert stale.returncode == 5 and "runs attempt 1 now" in stale.stderr

    # Outside it, the owner's login reports for the job; `show` prints the last one.
    again = stack.muster("checkpoint", str(job_id), "--step", "4500", "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["checkpoint_step"] == 4500
    assert "step 4500 (attempt 1)" in stack.muster("show", str(job_id)).stdout
    nothing = stack.muster("checkpoint")
    assert nothing.returncode == 2 and "give the job's ID" in nothing.stderr
    assert stack.muster("cancel", str(job_id)).returncode == 0


def test_errors_are_one_line_with_an_exit_code_a_script_can_use(stack: Stack, tmp_path: Path) -> None:
    wrong = stack.muster("login", stack.url, "--username", "researcher", env={"MUSTER_PASSWORD": "not-the-password"})
    assert (wrong.returncode, wrong.stderr) == (4, "muster: error: Wrong username or password.\n")

    no_token = stack.muster("--url", stack.url, "jobs")
    assert no_token.returncode == 4
    assert no_token.stderr == f"muster: error: not logged in to {stack.url} — run `muster login {stack.url}`\n"

    stack.login()
    bad_token = stack.muster("jobs", "--token", "not-a-token")
    assert bad_token.returncode == 4
    assert bad_token.stderr.startswith("muster: error: the server refused the token: ")
    assert bad_token.stderr.endswith(f" — run `muster login {stack.url}`\n") and ". —" not in bad_token.stderr
    assert bad_token.stderr.count("\n") == 1

    too_many = stack.muster("submit", "-G", "99", "-t", "1h", "--image", IMAGE, "--", "python", "train.py")
    assert (too_many.returncode, too_many.stdout) == (5, "")
    assert too_many.stderr == "muster: error: gpus_per_node: No node has 99 GPUs; the largest node has 8.\n"
    dry = stack.muster("submit", "-G", "99", "-t", "1h", "--image", IMAGE, "--dry-run", "--", "python", "train.py")
    assert dry.returncode == 5
    assert "gpus_per_node: 99" in dry.stdout  # what would have been sent
    assert dry.stderr == "muster: error: it would be refused: gpus_per_node: No node has 99 GPUs; the largest node has 8.\n"
    missing = stack.muster("submit", "-t", "1h", "--", "python", "train.py")
    assert missing.returncode == 2  # said by the CLI, naming its flags, not the API's fields
    assert missing.stderr.startswith("muster: error: missing --image IMAGE (image: in a job.yaml) and -G/--gpus-per-node N, ")
    assert Job.objects.count() == 0

    unknown = stack.muster("show", "999999")
    assert (unknown.returncode, unknown.stderr) == (5, "muster: error: No job 999999 (or none that you may see).\n")
    # Several at once: each refusal names its job once.
    unknown = stack.muster("cancel", "999998", "999999")
    assert unknown.returncode == 5
    assert unknown.stderr == "".join(f"muster: error: No job {n} (or none that you may see).\n" for n in (999998, 999999))

    gone = f"http://127.0.0.1:{free_port()}"
    down = stack.muster("queue", "--url", gone, "--token", "whatever")
    assert (down.returncode, down.stdout) == (3, "")
    assert down.stderr == f"muster: error: cannot reach the Muster server at {gone} (connection refused)\n"


class DropFirstAnswer(BaseHTTPRequestHandler):
    """A proxy in front of the server that passes every request on but loses the answer to the first submit."""

    upstream = ""
    submits: list[str | None] = []

    def _relay(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        target = urlsplit(self.upstream)
        conn = http.client.HTTPConnection(target.hostname or "127.0.0.1", target.port, timeout=30)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
        conn.request(self.command, self.path, body=body or None, headers=headers)
        answer = conn.getresponse()
        data = answer.read()
        conn.close()
        if self.command == "POST" and self.path == "/api/v1/jobs/":
            self.submits.append(self.headers.get("Idempotency-Key"))
            if len(self.submits) == 1:
                # The job was made upstream; the client only sees a gateway error.
                self.send_response(502)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
        self.send_response(answer.status)
        for key, value in answer.getheaders():
            if key.lower() not in ("connection", "transfer-encoding", "content-length"):
                self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = _relay

    def log_message(self, *args: Any) -> None:
        pass  # quiet: the test's output is the CLI's


def test_the_python_client_follows_pages_and_a_retried_submit_makes_one_job(stack: Stack) -> None:
    client = Client.login(stack.url, "researcher", PASSWORD)
    assert client.token and client.token_expires_at
    spec = {"name": "nb", "image": IMAGE, "command": ["python", "nb.py"], "gpus_per_node": 1, "wall_time_seconds": 60, "nodes": 1}
    made = [client.submit({**spec, "name": f"nb-{i}"})["id"] for i in range(5)]

    gets: list[str] = []
    session = requests.Session()
    session.hooks["response"].append(lambda r, *a, **k: gets.append(r.url))
    paged = Client(stack.url, client.token, session=session)
    assert [j["id"] for j in paged.jobs(limit=2)] == made[::-1]  # newest first, across 3 pages of 2
    assert len(gets) == 3
    assert [j["id"] for j in paged.jobs(name="nb-3")] == [made[3]]
    assert client.validate(spec) == {"valid": True, "count": 1}
    assert client.submit_array(spec, "1,3,5-7:2")["count"] == 4  # 1, 3, 5, 7

    DropFirstAnswer.submits = []
    proxy = ThreadingHTTPServer(("127.0.0.1", 0), type("Proxy", (DropFirstAnswer,), {"upstream": stack.url}))
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    try:
        before = Job.objects.count()
        through_proxy = Client(f"http://127.0.0.1:{proxy.server_address[1]}", client.token)
        job = through_proxy.submit({**spec, "name": "retried"})
    finally:
        proxy.shutdown()
    assert len(DropFirstAnswer.submits) == 2 and len(set(DropFirstAnswer.submits)) == 1, "sent twice with one key"
    assert Job.objects.count() == before + 1
    assert Job.objects.get(name="retried").pk == job["id"]
