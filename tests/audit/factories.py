"""Audit entries."""

from __future__ import annotations

import factory

from audit.models import AuditEntry
from tests.jobs.factories import JobFactory


class AuditEntryFactory(factory.django.DjangoModelFactory):
    """An entry about a job (so the job's owner sees it): by default Muster itself cancelled it."""

    class Meta:
        model = AuditEntry

    job = factory.SubFactory(JobFactory)
    action = "job.cancel"
    target_type = "job"
    target_id = factory.LazyAttribute(lambda o: str(o.job.pk))
    target_repr = factory.LazyAttribute(lambda o: f"job {o.job.pk}")
    changes = factory.LazyFunction(lambda: {"state": ["PENDING", "CANCELLED"]})
