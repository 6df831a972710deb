"""The simulated cluster: N nodes x G GPUs in R racks where jobs "run" for a set time.

It is the embedded default, so `make run` shows the whole platform on a laptop.
Its pods live in the database (`SimulatedPod`), so web, worker and beat see the
same cluster. A pod is Pending for a short start-up time, Running for the job's
simulated duration, then Succeeded or Failed by the job's simulated exit code.

The duration is the job's whole run: an attempt after one that reported a checkpoint resumes from that checkpoint's
step and runs only what is left, as training code that reads its checkpoint would.
"""

from __future__ import annotations

import re
import shlex
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import IntegrityError, transaction
from django.utils import timezone

from jobs.checkpoints import CheckpointInvalid, job_checkpoint_report
from jobs.cluster.base import MIG_COMPUTE_SLICES, CapturedLog, ClusterNode, GangSpec, PodPhase, PodStatus
from jobs.errors import JobNotRunning
from jobs.models import Job, SimulatedPod

SIMULATED_GPU = "Simulated H100 80GB"
SIMULATED_GPU_MEMORY_GB = 80.0
_SHARED_NODES = re.compile(r"^(time-slicing|mps):(\d+):(\d+)$|^mig:(\d+g\.\d+gb):(\d+)$")


def shared_nodes_setting(value: str) -> tuple[tuple[str, str, int], ...]:
    """MUSTER_SIM_SHARED_NODES ("time-slicing:4:1,mig:1g.10gb:1") as (mode, slices or profile, nodes)."""
    pools = []
    for item in filter(None, (part.strip() for part in value.split(","))):
        match = _SHARED_NODES.match(item)
        if not match:
            raise ImproperlyConfigured(
                f"MUSTER_SIM_SHARED_NODES: {item!r} is not time-slicing:SLICES:NODES, mps:SLICES:NODES or mig:PROFILE:NODES "
                "(e.g. time-slicing:4:1,mig:1g.10gb:1)."
            )
        if match[4]:
            pools.append(("mig", match[4], int(match[5])))
        else:
            pools.append((match[1], match[2], int(match[3])))
    return tuple(pools)


# A simulated pod prints a line per this many seconds of run time, as a training loop logs its steps.
LOG_STEP_SECONDS = 10
STEPS_PER_LINE = 100
FOLLOW_POLL_SECONDS = 1.0


@dataclass
class SimulatedCluster:
    nodes: int = 16
    gpus_per_node: int = 8
    racks: int = 2
    # RDMA devices on each node of the first rack (the others have none), so jobs asking for them have somewhere to go.
    rdma_devices: int = 8
    # Nodes whose GPUs are shared, beyond `nodes` (MUSTER_SIM_SHARED_NODES): (mode, slices or MIG profile, count).
    shared: tuple[tuple[str, str, int], ...] = ()
    start_seconds: float = 1.0
    default_duration_seconds: float = 30.0
    simulated: bool = True
    # Tests drive time through this instead of sleeping.
    clock: Callable[[], datetime] = field(default=timezone.now)

    @classmethod
    def from_settings(cls) -> SimulatedCluster:
        return cls(
            nodes=settings.MUSTER_SIM_NODES,
            gpus_per_node=settings.MUSTER_SIM_GPUS_PER_NODE,
            racks=max(1, settings.MUSTER_SIM_RACKS),
            rdma_devices=settings.MUSTER_SIM_RDMA_DEVICES,
            shared=shared_nodes_setting(settings.MUSTER_SIM_SHARED_NODES),
            start_seconds=settings.MUSTER_SIM_START_SECONDS,
            default_duration_seconds=settings.MUSTER_SIM_DEFAULT_DURATION_SECONDS,
        )

    def prepare(self) -> None:
        """Nothing to prepare: the simulated cluster is rows of this database."""

    def note_foreign_pods_version(self, version: int) -> None:
        """No pods but Muster's run on the simulated cluster."""

    def mark_holds(self, marks: Mapping[str, str | None]) -> None:
        """No one looks at the simulated cluster but through Muster, which shows its holds itself."""

    def list_nodes(self) -> list[ClusterNode]:
        per_rack = -(-self.nodes // self.racks)
        nodes = [
            ClusterNode(
                name=f"sim-node-{i:03d}",
                gpus_total=self.gpus_per_node,
                rack=f"rack-{i // per_rack + 1}",
                rdma_devices=self.rdma_devices if i < per_rack else 0,
                gpu_model=SIMULATED_GPU,
            )
            for i in range(self.nodes)
        ]
        for mode, slices, count in self.shared:
            for i in range(count):
                nodes.append(self._shared_node(f"sim-{mode}-{i:03d}", mode, slices))
        return nodes

    def _shared_node(self, name: str, mode: str, slices: str) -> ClusterNode:
        """A node of a shared pool, as the NVIDIA device plugin would offer it (jobs.cluster.kubernetes.shared_gpus)."""
        if mode == "mig":
            compute, memory = (int(part.rstrip("gb")) for part in slices.split("g.", 1))
            per_gpu, share, memory_gb, resource = (
                MIG_COMPUTE_SLICES // compute,
                compute / MIG_COMPUTE_SLICES,
                float(memory),
                f"nvidia.com/mig-{slices}",
            )
        else:
            per_gpu = int(slices)
            share, resource = 1 / per_gpu, "nvidia.com/gpu.shared"
            memory_gb = SIMULATED_GPU_MEMORY_GB / per_gpu if mode == "mps" else 0.0
        return ClusterNode(
            name=name,
            gpus_total=self.gpus_per_node,
            rack=f"rack-{self.racks}",
            gpu_model=SIMULATED_GPU,
            sharing=mode,
            slices_per_gpu=per_gpu,
            slice_gpus=share,
            slice_memory_gb=memory_gb,
            slice_resource=resource,
        )

    def launch_gang(self, spec: GangSpec) -> None:
        self.launch_ranks(spec, list(range(len(spec.node_names))))

    def launch_ranks(self, spec: GangSpec, ranks: list[int]) -> None:
        created = self.clock()
        duration = float(spec.simulate.get("duration_seconds", self.default_duration_seconds))
        exit_code = int(spec.simulate.get("exit_code", 0))
        checkpoint_every = float(spec.simulate.get("checkpoint_every_seconds", 0.0))
        resumed = self._resumed_seconds(spec, duration)
        duration = max(0.0, duration - resumed)
        if ranks and ranks[0] > 0:
            # A grown rank joins a job already running: it ends with the rest (its rendezvous), not a full run later.
            first = SimulatedPod.objects.filter(job_id=spec.job_id, attempt=spec.attempt, rank=0).first()
            if first is not None:
                duration = max(0.0, (first.created_at - created).total_seconds() + first.duration_seconds)
        for rank in ranks:
            node_name = spec.node_names[rank]
            try:
                with transaction.atomic():
                    SimulatedPod.objects.create(
                        job_id=spec.job_id,
                        attempt=spec.attempt,
                        rank=rank,
                        node_name=node_name,
                        gpus=spec.gpus_on(rank),  # what a real pod asks: every GPU held on its node
                        duration_seconds=duration,
                        # A failing job fails on its last rank, the way one bad rank takes a gang down.
                        exit_code=exit_code if rank == len(spec.node_names) - 1 else 0,
                        checkpoint_every_seconds=checkpoint_every if rank == 0 else 0.0,
                        resumed_seconds=resumed,
                        created_at=created,
                        command=list(spec.command),
                        env={**spec.env, **spec.muster_env()},
                    )
            except IntegrityError:
                continue  # already exists: a retried launch

    def _resumed_seconds(self, spec: GangSpec, duration: float) -> float:
        """The run time an attempt resumes from: its job's last checkpoint, when an earlier attempt reported one (the job
        keeps it across attempts, jobs.checkpoints), as seconds of the simulated run (its step / STEPS_PER_LINE lines of
        LOG_STEP_SECONDS); 0 for a first attempt, or one after attempts that reported none. At most the whole run."""
        step, attempt = Job.objects.filter(pk=spec.job_id).values_list("checkpoint_step", "checkpoint_attempt").first() or (None, None)
        if step is None or attempt is None or attempt >= spec.attempt:
            return 0.0
        return min(duration, step / STEPS_PER_LINE * LOG_STEP_SECONDS)

    def teardown_gang(self, job_id: int, attempt: int, grace_seconds: int | None = None) -> None:
        # Simulated pods hold no state to checkpoint: they stop at once, whatever the grace period.
        SimulatedPod.objects.filter(job_id=job_id, attempt=attempt).delete()

    def teardown_ranks(self, job_id: int, attempt: int, ranks: list[int], grace_seconds: int | None = None) -> None:
        SimulatedPod.objects.filter(job_id=job_id, attempt=attempt, rank__in=ranks).delete()

    def pods_gone_how(self, job_id: int, attempt: int, ranks: Sequence[int]) -> str:
        return ""  # a simulated pod leaves no trace of who deleted it

    def gang_notes(self) -> Mapping[tuple[int, int], list[str]]:
        return {}  # nothing of a simulated gang goes missing but its pods

    def observe_gangs(self) -> dict[tuple[int, int], list[PodStatus]]:
        now = self.clock()
        gangs: dict[tuple[int, int], list[PodStatus]] = {}
        pods = list(SimulatedPod.objects.order_by("job_id", "attempt", "rank"))
        # What each checkpointing job last recorded, read once: a report only when there is a new checkpoint, so a
        # cycle does not lock every such job's row to be told it has nothing new.
        recorded = {
            pk: (attempt, step)
            for pk, attempt, step in Job.objects.filter(pk__in={p.job_id for p in pods if p.checkpoint_every_seconds}).values_list(
                "pk", "checkpoint_attempt", "checkpoint_step"
            )
        }
        for pod in pods:
            status = self._status(pod, now)
            gangs.setdefault((pod.job_id, pod.attempt), []).append(status)
            if pod.checkpoint_every_seconds and status.phase == PodPhase.RUNNING:
                self._report_checkpoint(pod, now, recorded.get(pod.job_id))
        return gangs

    def _ran(self, pod: SimulatedPod, now: datetime) -> float:
        """Seconds the pod has run by `now` (negative while it starts), at most its duration."""
        return min((now - pod.created_at).total_seconds() - self.start_seconds, pod.duration_seconds)

    def _checkpoints(self, pod: SimulatedPod, now: datetime) -> list[float]:
        """The checkpoints the pod has written by `now`, as seconds of the job's whole run: one every
        checkpoint_every_seconds of it, after the one it resumed from."""
        every = pod.checkpoint_every_seconds
        if not every:
            return []
        first = int(pod.resumed_seconds // every) + 1
        last = int((pod.resumed_seconds + max(0.0, self._ran(pod, now))) // every)
        return [k * every for k in range(first, last + 1)]

    def _report_checkpoint(self, pod: SimulatedPod, now: datetime, recorded: tuple[int | None, int | None] | None) -> None:
        # What the job's code does after saving (`muster checkpoint`), at the simulated time it saved. Before the cycle
        # has marked the job running the report is refused, as a real one would be; a later cycle reports it again.
        written = self._checkpoints(pod, now)
        if not written:
            return
        step = self._step(written[-1])
        if recorded == (pod.attempt, step):
            return
        at = pod.created_at + timedelta(seconds=self.start_seconds + written[-1] - pod.resumed_seconds)
        try:
            job_checkpoint_report(pod.job_id, at=at, step=step, attempt=pod.attempt, now=now)
        except (JobNotRunning, CheckpointInvalid):
            pass

    def read_logs(self, job_id: int, attempt: int, rank: int, tail: int | None = None) -> str:
        pod = SimulatedPod.objects.filter(job_id=job_id, attempt=attempt, rank=rank).first()
        if pod is None:
            return ""
        lines = self._log_lines(pod, self.clock())
        return "".join(lines[-tail:] if tail else lines)

    def read_log_tail(self, job_id: int, attempt: int, rank: int, max_bytes: int) -> CapturedLog | None:
        pod = SimulatedPod.objects.filter(job_id=job_id, attempt=attempt, rank=rank).first()
        if pod is None:
            return None
        return CapturedLog.of("".join(self._log_lines(pod, self.clock())).encode(), max_bytes)

    def follow_logs(
        self, job_id: int, attempt: int, rank: int, tail: int | None = None, *, still_live: Callable[[], bool] | None = None
    ) -> Iterator[str]:
        sent = 0
        while True:
            pod = SimulatedPod.objects.filter(job_id=job_id, attempt=attempt, rank=rank).first()
            if pod is None:
                return
            now = self.clock()
            lines = self._log_lines(pod, now)
            if sent == 0 and tail:
                sent = max(0, len(lines) - tail)
            if len(lines) > sent:
                yield "".join(lines[sent:])
                sent = len(lines)
            if self._status(pod, now).phase in (PodPhase.SUCCEEDED, PodPhase.FAILED):
                return
            if still_live is not None and not still_live():
                return
            time.sleep(FOLLOW_POLL_SECONDS)

    def _log_lines(self, pod: SimulatedPod, now: datetime) -> list[str]:
        """What a training script might print: a start line, a step every LOG_STEP_SECONDS while it runs, how it ended.
        Steps and their times are of the job's whole run (an attempt that resumed goes on from its checkpoint's); the
        last line says how long this attempt's containers ran, as Muster times its RUNNING."""
        where = f"job {pod.job_id} attempt {pod.attempt} rank {pod.rank} on {pod.node_name}"
        # Quoted as a shell would need it: `--config 'my run.yaml'` read `--config my run.yaml`, two arguments.
        lines = [f"[simulated cluster] no container runs: {where}\n", f"$ {shlex.join(pod.command)}\n"]
        resumed, total = pod.resumed_seconds, pod.resumed_seconds + pod.duration_seconds
        if resumed:
            lines.append(f"resumed from the checkpoint at step {self._step(resumed)} ({resumed:g} s of {total:g} s)\n")
        ran = self._ran(pod, now)
        reached = resumed + max(0.0, ran)
        timed: list[tuple[float, str]] = [
            (k * LOG_STEP_SECONDS, f"step {k * STEPS_PER_LINE} ({k * LOG_STEP_SECONDS:g} s of {total:g} s)\n")
            for k in range(int(resumed // LOG_STEP_SECONDS) + 1, int(reached // LOG_STEP_SECONDS) + 1)
        ]
        timed += [(at, f"checkpoint saved at step {self._step(at)}; reported to Muster\n") for at in self._checkpoints(pod, now)]
        lines += [line for _, line in sorted(timed, key=lambda t: t[0])]
        status = self._status(pod, now)
        if status.phase in (PodPhase.SUCCEEDED, PodPhase.FAILED):
            # This attempt's run, from its containers' start, as the job's RUNNING is timed (`_status`).
            lines.append(f"[simulated cluster] exited with code {pod.exit_code} after {pod.duration_seconds:g} s\n")
        return lines

    @staticmethod
    def _step(seconds: float) -> int:
        """The training step the simulated job has reached after `seconds` of run time (its log lines' count)."""
        return int(seconds / LOG_STEP_SECONDS * STEPS_PER_LINE)

    def _status(self, pod: SimulatedPod, now: datetime) -> PodStatus:
        # When its container came up and exited, as a kubelet says them: the cycle times the job's RUNNING and its end by
        # these, not by when it looked (a busy machine's cycle saw a 10 s run as 9 s starting and 3 s running).
        started = pod.created_at + timedelta(seconds=self.start_seconds)
        if now < started:
            return PodStatus(pod.rank, pod.node_name, PodPhase.PENDING)
        ended = started + timedelta(seconds=pod.duration_seconds)
        if now < ended:
            return PodStatus(pod.rank, pod.node_name, PodPhase.RUNNING, started_at=started)
        if pod.exit_code == 0:
            return PodStatus(pod.rank, pod.node_name, PodPhase.SUCCEEDED, 0, started_at=started, finished_at=ended)
        return PodStatus(
            pod.rank, pod.node_name, PodPhase.FAILED, pod.exit_code, f"rank {pod.rank} exited with code {pod.exit_code}.",
            started_at=started, finished_at=ended,
        )  # fmt: skip
