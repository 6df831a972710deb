"""Watches Muster's pods, the cluster's nodes and the pods it did not start, and asks for a scheduling cycle when
something changes.

The cycle stays the one place that moves jobs (it re-reads the whole world under its
lock), so the watch only has to be prompt, not exact: every event that may change a
job's state (a pod running, failing, succeeding or vanishing; a node appearing,
going NotReady or disappearing) enqueues one cycle, at most one per `debounce`
seconds, and one more at the end of the window if events came during it. A pod Muster did
not start that takes devices on a node or gives them back (bound, ended, deleted) calls
`recount` instead (muster_watch: move ClusterHealth.foreign_pods_version, then enqueue a
cycle), so no worker uses its last read of such pods, which otherwise serves it for
`MUSTER_K8S_FOREIGN_PODS_SECONDS`. Bookmarks (asked for, so a quiet watch resumes from a recent version) move the
version on without a cycle. A `410 Gone` (the resource version fell out of the API server's
window; the client raises it from the watch's ERROR event) relists and goes on; a lost
connection waits and reconnects, while beat's periodic cycle keeps everything moving in between.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kubernetes import watch
from kubernetes.client.exceptions import ApiException

from jobs.cluster.kubernetes import BOUND_PODS_SELECTOR, KubernetesCluster, pod_requests
from jobs.cluster.manifests import LABEL_MANAGED, MANAGED_BY

logger = logging.getLogger(__name__)


def _timer(delay: float, call: Callable[[], object]) -> None:
    timer = threading.Timer(delay, call)
    timer.daemon = True
    timer.start()


@dataclass
class Trigger:
    """Calls `fire` at most once per `debounce` seconds, however many events arrive, and once more at the end of
    a window in which events were held back: the last change of a burst is never left to beat's next cycle."""

    fire: Callable[[], object]
    debounce: float = 1.0
    clock: Callable[[], float] = time.monotonic
    later: Callable[[float, Callable[[], object]], object] = _timer
    _last: float = field(default=float("-inf"), init=False)
    _held: bool = field(default=False, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)

    def __call__(self) -> bool:
        with self._lock:
            now = self.clock()
            if now - self._last < self.debounce:
                if not self._held:
                    self._held = True
                    self.later(self._last + self.debounce - now, self._fire_held)
                return False
            self._last = now
        self.fire()
        return True

    def _fire_held(self) -> None:
        with self._lock:
            self._held = False
            self._last = self.clock()
        self.fire()


def event_version(event: dict[str, Any]) -> str:
    """The resource version an event leaves the watch at.

    The client deserializes the objects of ADDED, MODIFIED and DELETED events, but leaves a BOOKMARK's as the
    plain dict the API server sent (it may be partial), so both are read; an ERROR's (a Status) carries none.
    """
    obj = event["object"]
    if isinstance(obj, dict):
        return str((obj.get("metadata") or {}).get("resourceVersion") or "") if event["type"] != "ERROR" else ""
    metadata = getattr(obj, "metadata", None)
    return str(getattr(metadata, "resource_version", None) or "")


@dataclass
class ResourceWatch:
    """One watched collection: list once for a resource version, then follow events; relist on 410."""

    name: str
    list_fn: Callable[..., Any]  # a client's list_* (a V1...List)
    on_event: Callable[[str, object], None]
    kwargs: dict[str, object] = field(default_factory=dict)
    # Options of the list alone (not the watch): where only its resource version is used, one item is enough.
    list_kwargs: dict[str, object] = field(default_factory=dict)
    resync_seconds: int = 300
    relists: int = 0

    def run(self, stop: threading.Event, retry_seconds: float = 2.0) -> None:
        version = ""
        # A refusal said once, not with its headers and body every 2 s (28 times in the first minute before an admin
        # applied the RBAC), and tried again less and less often, up to once a minute, until it works.
        refused, delay = "", retry_seconds
        while not stop.is_set():
            try:
                if not version:
                    listed = self.list_fn(**self.kwargs, **self.list_kwargs)
                    version = listed.metadata.resource_version
                    self.relists += 1
                    if refused:
                        logger.warning("%s watch works again", self.name)
                        refused, delay = "", retry_seconds
                    self.on_event("RELISTED", listed)
                stream = watch.Watch().stream(
                    self.list_fn, resource_version=version, timeout_seconds=self.resync_seconds, allow_watch_bookmarks=True, **self.kwargs
                )
                for event in stream:
                    if stop.is_set():
                        return
                    version = event_version(event) or version
                    if event["type"] not in ("BOOKMARK", "ERROR"):
                        self.on_event(event["type"], event["object"])
            except ApiException as exc:
                if exc.status == 410:
                    logger.info("%s watch: resource version %s is gone; relisting", self.name, version)
                    version = ""
                    continue
                said = refusal_text(exc)
                if said != refused:
                    logger.warning("%s watch refused: %s; trying again, at most once a minute", self.name, said)
                    refused = said
                stop.wait(delay)
                delay = min(delay * 2, MAX_RETRY_SECONDS)
            except Exception as exc:  # connection lost, API server down: beat's cycles go on meanwhile
                logger.warning("%s watch lost its connection: %s; retrying in %.0f s", self.name, exc, retry_seconds)
                version = ""
                stop.wait(retry_seconds)


# The longest wait between tries of a refused watch.
MAX_RETRY_SECONDS = 60.0


def refusal_text(exc: ApiException) -> str:
    """The API server's refusal in a line: its status, and its message (`pods is forbidden: User ... cannot watch ...`),
    not the response's headers and body."""
    message = ""
    try:
        message = str(json.loads(exc.body or "{}").get("message") or "")
    except (ValueError, AttributeError):
        pass
    return f"{exc.status} {exc.reason}" + (f": {message}" if message else "")


def watches_for(
    cluster: KubernetesCluster, trigger: Callable[[], object], recount: Callable[[], object] | None = None
) -> list[ResourceWatch]:
    """The watches of Muster's pods and of nodes, calling `trigger`; with `recount`, also of the pods Muster did not
    start (bound to a node, in every namespace), calling `recount` when one of those asking for a device comes or goes."""

    def on_event(kind: str, obj: object) -> None:
        trigger()

    core = cluster.core
    watches = [
        ResourceWatch(
            name="pods",
            list_fn=core.list_namespaced_pod,
            on_event=on_event,
            kwargs={"namespace": cluster.options.namespace, "label_selector": f"{LABEL_MANAGED}={MANAGED_BY}"},
        ),
        ResourceWatch(name="nodes", list_fn=core.list_node, on_event=on_event),
    ]
    if recount is not None:
        watches.append(
            ResourceWatch(
                name="other pods",
                list_fn=core.list_pod_for_all_namespaces,
                on_event=_on_foreign_event(cluster, recount),
                kwargs={"field_selector": BOUND_PODS_SELECTOR},
                # Every pod in the cluster would be parsed into the client's models for nothing: the cycle reads them.
                list_kwargs={"limit": 1},
            )
        )
    return watches


def _on_foreign_event(cluster: KubernetesCluster, recount: Callable[[], object]) -> Callable[[str, object], None]:
    def on_event(kind: str, obj: object) -> None:
        # A field-selected watch says DELETED when a pod leaves the selection (it ended) and ADDED when it enters it
        # (bound to a node); MODIFIED cannot change what a bound pod holds.
        if kind == "RELISTED" or (kind in ("ADDED", "DELETED") and _foreign_with_devices(cluster, obj)):
            recount()

    return on_event


def _foreign_with_devices(cluster: KubernetesCluster, pod: object) -> bool:
    """Whether a pod Muster did not start asks for a device (an extended resource: GPUs, GPU slices, RDMA devices):
    only those change what Muster counts as held on a node."""
    data = cluster.api.sanitize_for_serialization(pod)
    if cluster.is_own_pod(data.get("metadata") or {}):
        return False
    return any("/" in name for name in pod_requests(data.get("spec") or {}))


def watch_forever(
    cluster: KubernetesCluster,
    trigger: Callable[[], object],
    recount: Callable[[], object] | None = None,
    stop: threading.Event | None = None,
) -> None:
    stop = stop or threading.Event()
    watches = watches_for(cluster, trigger, recount)
    threads = [threading.Thread(target=w.run, args=(stop,), name=f"watch-{w.name}", daemon=True) for w in watches]
    for thread in threads:
        thread.start()
    try:
        while not stop.wait(1.0):
            pass
    finally:
        stop.set()
