"""Teams, quotas and ledger rows."""

from __future__ import annotations

import factory
from django.utils import timezone

from quotas.models import Quota, Team, UsageCharge
from tests.accounts.factories import UserFactory
from tests.jobs.factories import JobFactory


class TeamFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Team

    name = factory.Sequence(lambda n: f"team-{n}")


class QuotaFactory(factory.django.DjangoModelFactory):
    """A quota on exactly one account: a new user's unless `team` (or `user`) is given."""

    class Meta:
        model = Quota

    team = None
    user = factory.Maybe("team", yes_declaration=None, no_declaration=factory.SubFactory(UserFactory))


def this_period() -> object:
    """The start of the current budget month in the current time zone (the default period)."""
    return timezone.localtime().replace(day=1, hour=0, minute=0, second=0, microsecond=0)


class UsageChargeFactory(factory.django.DjangoModelFactory):
    """What a finished job was charged in one budget period (this month unless given)."""

    class Meta:
        model = UsageCharge

    job = factory.SubFactory(JobFactory, finished=True)
    job_number = factory.SelfAttribute("job.pk")
    user = factory.SelfAttribute("job.owner")
    team = factory.SelfAttribute("job.team")
    period_start = factory.LazyFunction(this_period)
    node_seconds = 3600.0
    gpu_seconds = factory.LazyAttribute(lambda o: o.node_seconds * o.job.gpus_per_node)
