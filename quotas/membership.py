"""What leaving a team does to the jobs its former member queued for it.

A job is charged to its team (quotas, budgets, the ledger, fair share) and submit takes only a team its owner is in. A
member who leaves (removed from the team, or the team taken from them) would otherwise keep jobs queued under a team
they no longer belong to, charged to it when they start. Slurm makes such jobs ineligible (InvalidAccount); Muster has
no way to move a job to another team, so they are cancelled, each with the reason, and the admin is told which.
Running jobs run to their end, charged to the team as they were placed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction

from jobs.models import Job
from jobs.services import job_cancel
from jobs.states import ACTIVE_STATES, JobState
from quotas.models import Team


@dataclass(frozen=True)
class MembersLeft:
    """What `team_members_left` did: the queued jobs it cancelled and the jobs of those members still running."""

    team: str
    members: list[str]
    cancelled: list[int]
    running: list[int]

    def warnings(self) -> list[str]:
        """The admin's words for it, one sentence per kind of job; none when the members had no jobs for the team."""
        who = ", ".join(self.members)
        found = []
        if self.cancelled:
            one = len(self.cancelled) == 1
            whose = "Its" if one else "Each one's"
            found.append(
                f"Cancelled {len(self.cancelled)} queued job{'' if one else 's'} of {who} for team {self.team} "
                f"({_listed(self.cancelled)}): a job is charged to a team its owner is in. "
                f"{whose} reason says why, for its owner to submit it again."
            )
        if self.running:
            one = len(self.running) == 1
            found.append(
                f"{len(self.running)} job{'' if one else 's'} of {who} for team {self.team} still "
                f"{'runs' if one else 'run'} ({_listed(self.running)}), charged to the team until "
                f"{'it ends' if one else 'they end'}; cancel {'it' if one else 'them'} to stop that."
            )
        return found


def _listed(pks: list[int]) -> str:
    return ", ".join(str(pk) for pk in pks[:10]) + (" and more" if len(pks) > 10 else "")


def team_members_left(*, team: Team, users: Iterable[User], by: User | None = None, request: Any = None) -> MembersLeft:
    """Cancel the PENDING jobs `users` queued for `team`, which they are no longer in (or are leaving, in the same
    transaction): each job's reason says why. `by` is the admin who removed them (on the audit trail, each job's
    cancel); None when Muster noticed it (the membership changed elsewhere: a shell, a script)."""
    users = list(users)
    names = sorted(user.get_username() for user in users)
    cancelled: list[int] = []
    with transaction.atomic():
        # Locked as they are read: a job the cycle is placing now is running by the time it is ours, and is left to run.
        queued = Job.objects.select_for_update().filter(team=team, owner__in=users, state=JobState.PENDING).order_by("pk")
        for job in queued.select_related("owner"):
            removed = f" (removed by {by.get_username()})" if by is not None else ""
            reason = (
                f"Cancelled while queued: {job.owner.get_username()} is no longer in team {team.name}, which it was "
                f"submitted for{removed}. A job is charged to a team its owner is in: submit it again to run it."
            )
            cancelled.append(job_cancel(job=job, by=by, reason=reason, request=request).pk)
        running = Job.objects.filter(team=team, owner__in=users, state__in=ACTIVE_STATES).order_by("pk")
        return MembersLeft(team=team.name, members=names, cancelled=cancelled, running=list(running.values_list("pk", flat=True)))


def members_changed(sender: Any, instance: Any, action: str, reverse: bool, pk_set: set[int] | None, **_kwargs: Any) -> None:
    """`m2m_changed` of Team.members, from either side (team.members, user.teams): whoever leaves a team leaves their
    jobs queued for it cancelled, however the membership changed. The admin's form does it first (TeamAdmin), with
    the admin named and told; then this finds nothing left to do."""
    if action == "pre_clear":  # clear() names nobody: who is leaving is read before they are gone
        pairs = [(instance, list(instance.members.all()))] if not reverse else [(team, [instance]) for team in instance.teams.all()]
    elif action == "post_remove" and pk_set:
        if not reverse:
            pairs = [(instance, list(User.objects.filter(pk__in=pk_set)))]
        else:
            pairs = [(team, [instance]) for team in Team.objects.filter(pk__in=pk_set)]
    else:
        return
    for team, users in pairs:
        team_members_left(team=team, users=users)
