"""`job_update` of dependencies (`muster update -d`, `scontrol update Dependency=`) from two connections at once: each
update alone finds no cycle in what the other has not committed, so both would pass and two jobs would wait for each
other for ever. The advisory lock the update takes first (jobs.dependencies.dependencies_graph_lock) makes the second wait for the
first and see its edge."""

from __future__ import annotations

import threading
from typing import Any

from django.core.exceptions import ValidationError
from django.db import connection, transaction

from jobs.dependencies import resolve
from jobs.models import Job, JobDependency
from jobs.services import job_update


def test_two_updates_at_once_cannot_make_two_jobs_wait_for_each_other(
    require_postgres: None, tx_submit: Any, django_user_model: Any
) -> None:
    owner = django_user_model.objects.get(username="carol")
    first, second = tx_submit(nodes=1)["id"], tx_submit(nodes=1)["id"]
    locked, release = threading.Event(), threading.Event()
    refused: list[str] = []

    def update(job_id: int, on: int, *, hold_open: bool) -> None:
        try:
            asked, problems = resolve(owner, [("afterok", on)])
            assert not problems
            with transaction.atomic():
                job_update(job_ids=[job_id], by=owner, changes={"dependencies": asked})
                if hold_open:
                    # Committed only once the other update has started and is waiting (or has gone past).
                    locked.set()
                    release.wait(10)
        except ValidationError as exc:
            refused.extend(exc.messages)
        finally:
            connection.close()

    one = threading.Thread(target=update, args=(first, second), kwargs={"hold_open": True})
    one.start()
    assert locked.wait(10)
    other = threading.Thread(target=update, args=(second, first), kwargs={"hold_open": False})
    other.start()
    other.join(1)
    assert other.is_alive(), "the second update went on while the first was uncommitted: it cannot have seen its edge"
    release.set()
    one.join(10)
    other.join(10)
    assert refused == [
        f"Job {second} would wait for itself: it would wait for job {first}, which waits for job {second}; none of them could ever start."
    ]
    assert list(JobDependency.objects.values_list("job_id", "on_id")) == [(first, second)]
    assert Job.objects.get(pk=second).dependencies.count() == 0
