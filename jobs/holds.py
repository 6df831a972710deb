"""What a held job's reason says (`muster hold`, Slurm's `scontrol hold`): the cycle waits it with this text."""

from __future__ import annotations

from datetime import datetime

from jobs.models import JobHold
from policy.model import when


def release_hint(job_id: int) -> str:
    """How an owner's hold ends, as the API and the CLI say it (the job page says its Release button instead)."""
    return f"`muster release {job_id}` lets it start."


def hold_reason(*, job_id: int, hold: str, held_by: str | None, held_at: datetime | None) -> str:
    """The reason a job held so shows: who held it, when, and who may release it (empty if it is not held)."""
    if not hold:
        return ""
    at = f" at {when(held_at.timestamp())}" if held_at is not None else ""
    if hold == JobHold.ADMIN:
        # No command: its owner, who reads it most, would be refused it.
        return f"Held by an admin{f' ({held_by})' if held_by else ''}{at}: only an admin can release it."
    return f"Held by its owner{f' ({held_by})' if held_by else ''}{at}: {release_hint(job_id)}"
