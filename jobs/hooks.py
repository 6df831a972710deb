"""The one hook point through which a job's life reaches the apps built on `jobs`.

`jobs` sits below the ledger (`quotas`), the scheduler and `telemetry` in the layering
(docs/architecture.md, "Layers"), so it may not import them. What they must do when a job is
submitted, leaves its GPUs or stops running, or what they add to its pods, they register here
from their `AppConfig.ready()`; `jobs` calls every registered function at the same place, and in
the same transaction, as the direct calls it replaces:

- `submit_checks` run inside `job_submit`'s transaction before the job row is written; raising
  `ValidationError` refuses the submit (quotas: limits that can never pass).
- `left_active` run inside `job_transition`'s transaction when a job leaves SCHEDULED/RUNNING, while
  its allocations are still live, so the ledger charges up to that instant before they are released.
- `resizing` run inside `job_resize`'s transaction before an elastic job's allocations change, so the ledger
  charges what it held up to that instant (quotas: the same charge as `left_active`).
- `left_running` run inside that transaction when a job leaves RUNNING (telemetry: store the run).
- `state_changed` run inside `job_transition`'s transaction after every move, with its event written (notify: the
  messages a job's owner asked for, written as an outbox in the same transaction).
- `event_recorded` run when an event of a job's history is written, in the transaction that writes it, whoever
  writes it (`JobEvent.save`: `job_transition`, holds and notes, histories written directly). Telemetry: add a
  start's wait and an end to /metrics' running totals, so no scrape reads the history.
- `queue_changed` run when a job was queued, requeued or cancelled, to be acted on after the commit
  (scheduler: run a cycle soon).
- `pod_secret_env` give environment variables each pod of a gang gets from a Secret, never from its
  spec (telemetry: the job's push token).

A hook registered twice (a second `ready()` in one process) is kept once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Protocol, TypeVar

if TYPE_CHECKING:
    from django.contrib.auth.models import User

    from jobs.models import Job, JobEvent
    from quotas.models import Team  # Job.team's model; a type-only name, see docs/architecture.md


class SubmitCheck(Protocol):
    def __call__(
        self,
        *,
        owner: User,
        team: Team | None,
        nodes: int,
        gpus_per_node: int,
        wall_time_seconds: int,
        preemptible: bool,
        gpu_fraction: float | None,  # a slice of one GPU (None: whole GPUs)
        volumes: Sequence[Mapping[str, object]],
    ) -> None: ...


class LeftActive(Protocol):
    def __call__(self, *, job: Job, until: datetime) -> None: ...


class StateChanged(Protocol):
    def __call__(self, *, job: Job, from_state: str, to_state: str, reason: str, now: datetime) -> None: ...


class EventRecorded(Protocol):
    def __call__(self, *, event: JobEvent) -> None: ...


class LeftRunning(Protocol):
    def __call__(self, *, job: Job, attempt: int, now: datetime) -> None: ...


QueueChanged = Callable[[], None]
PodSecretEnv = Callable[[int], dict[str, str]]
Hook = TypeVar("Hook")


@dataclass
class JobHooks:
    submit_checks: list[SubmitCheck] = field(default_factory=list)
    left_active: list[LeftActive] = field(default_factory=list)
    resizing: list[LeftActive] = field(default_factory=list)
    left_running: list[LeftRunning] = field(default_factory=list)
    state_changed: list[StateChanged] = field(default_factory=list)
    event_recorded: list[EventRecorded] = field(default_factory=list)
    queue_changed: list[QueueChanged] = field(default_factory=list)
    pod_secret_env: list[PodSecretEnv] = field(default_factory=list)

    def on_submit(self, check: SubmitCheck) -> None:
        _add_once(self.submit_checks, check)

    def on_left_active(self, hook: LeftActive) -> None:
        _add_once(self.left_active, hook)

    def on_state_changed(self, hook: StateChanged) -> None:
        _add_once(self.state_changed, hook)

    def on_event_recorded(self, hook: EventRecorded) -> None:
        _add_once(self.event_recorded, hook)

    def on_resizing(self, hook: LeftActive) -> None:
        _add_once(self.resizing, hook)

    def on_left_running(self, hook: LeftRunning) -> None:
        _add_once(self.left_running, hook)

    def on_queue_changed(self, hook: QueueChanged) -> None:
        _add_once(self.queue_changed, hook)

    def on_pod_secret_env(self, hook: PodSecretEnv) -> None:
        _add_once(self.pod_secret_env, hook)


def _add_once(hooks: list[Hook], hook: Hook) -> None:
    if hook not in hooks:
        hooks.append(hook)


job_hooks = JobHooks()


def queue_changed() -> None:
    for hook in job_hooks.queue_changed:
        hook()


def pod_secret_env(job_id: int) -> dict[str, str]:
    env: dict[str, str] = {}
    for hook in job_hooks.pod_secret_env:
        env.update(hook(job_id))
    return env
