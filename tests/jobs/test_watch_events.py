"""The watch's reading of events, as the kubernetes client hands them over (no API server needed)."""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from jobs.cluster.watch import ResourceWatch


def listed(version: str) -> client.V1PodList:
    return client.V1PodList(items=[], metadata=client.V1ListMeta(resource_version=version))


def pod_event(kind: str, version: str) -> dict[str, Any]:
    pod = client.V1Pod(metadata=client.V1ObjectMeta(name="p", resource_version=version))
    return {"type": kind, "object": pod, "raw_object": {}}


# A bookmark as the client yields it: the API server's partial object, left a dict (kubernetes/watch/watch.py).
BOOKMARK = {"type": "BOOKMARK", "object": {"kind": "Pod", "apiVersion": "v1", "metadata": {"resourceVersion": "20"}}, "raw_object": {}}


def run_streams(monkeypatch: pytest.MonkeyPatch, streams: list[Any]) -> tuple[list[str], list[str]]:
    """Run one ResourceWatch over scripted streams (a list of events, or an exception to raise); returns the events
    it passed on and the resource version each stream was opened at."""
    stop = threading.Event()
    opened: list[str] = []
    seen: list[str] = []

    def stream(self: watch.Watch, fn: Any, *args: Any, resource_version: str = "", **kwargs: Any) -> Any:
        opened.append(resource_version)
        if len(opened) > len(streams):
            stop.set()
            return iter(())
        step = streams[len(opened) - 1]
        if isinstance(step, Exception):
            raise step
        return iter(step)

    monkeypatch.setattr(watch.Watch, "stream", stream)
    resource = ResourceWatch(name="pods", list_fn=lambda **_: listed("10"), on_event=lambda kind, obj: seen.append(kind))
    resource.run(stop, retry_seconds=0.01)
    return seen, opened


def test_a_bookmark_moves_the_version_on_without_a_cycle_or_a_reconnect(monkeypatch: pytest.MonkeyPatch, caplog: Any) -> None:
    caplog.set_level(logging.INFO, logger="jobs.cluster.watch")
    seen, opened = run_streams(monkeypatch, [[pod_event("ADDED", "15"), BOOKMARK], [pod_event("MODIFIED", "21")]])
    assert seen == ["RELISTED", "ADDED", "MODIFIED"]
    assert opened[:2] == ["10", "20"], "the second watch resumes from the bookmark, with no relist"
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text


def test_an_expired_version_relists_quietly_and_another_error_is_logged_with_its_message(
    monkeypatch: pytest.MonkeyPatch, caplog: Any
) -> None:
    caplog.set_level(logging.INFO, logger="jobs.cluster.watch")
    # The client raises an ERROR event's Status as an ApiException with its code and message.
    gone = ApiException(status=410, reason="Expired: too old resource version: 10 (40)")
    denied = ApiException(status=403, reason="Forbidden: pods is forbidden: User cannot watch resource pods")
    seen, _ = run_streams(monkeypatch, [gone, denied, [pod_event("ADDED", "41")]])
    assert seen == ["RELISTED", "RELISTED", "ADDED"]
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "pods is forbidden" in warnings[0]
    assert any("relisting" in r.getMessage() and r.levelno == logging.INFO for r in caplog.records)


def test_a_refusal_is_said_once_in_a_line_and_tried_again_less_often(monkeypatch: pytest.MonkeyPatch, caplog: Any) -> None:
    """Before an admin applied the RBAC, each watch logged the 403 with its headers and body every 2 s."""
    caplog.set_level(logging.INFO, logger="jobs.cluster.watch")
    body = '{"kind":"Status","message":"pods is forbidden: User \\"x\\" cannot watch resource \\"pods\\"","code":403}'
    refused = [ApiException(status=403, reason="Forbidden") for _ in range(4)]
    for exc in refused:
        exc.body = body
    waits: list[float] = []
    monkeypatch.setattr(threading.Event, "wait", lambda self, timeout=None: waits.append(timeout) or False)
    seen, _ = run_streams(monkeypatch, [*refused, [pod_event("ADDED", "41")]])
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert warnings == [
        'pods watch refused: 403 Forbidden: pods is forbidden: User "x" cannot watch resource "pods"; trying again, at most once a minute'
    ]
    assert waits == [0.01, 0.02, 0.04, 0.08]
    assert seen[-1] == "ADDED"
