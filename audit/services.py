"""Writing the audit trail. Callers record inside the transaction of the change, so both commit or neither."""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AnonymousUser, User
from django.db.models import Model
from django.http import HttpRequest

from audit.models import ACTIONS, TARGET_TYPES, AuditEntry


def client_address(request: HttpRequest | Any | None) -> str | None:
    """Where a request came from: REMOTE_ADDR, or the first X-Forwarded-For address behind a trusted proxy.

    X-Forwarded-For is only believed when MUSTER_TRUSTED_PROXY says a proxy in front
    sets it (and drops what clients send); otherwise anyone could write any address.
    Anything that is not an IP address is recorded as unknown (None).
    """
    if request is None:
        return None
    meta = request.META
    address = meta.get("REMOTE_ADDR", "")
    forwarded = meta.get("HTTP_X_FORWARDED_FOR", "")
    if settings.MUSTER_TRUSTED_PROXY and forwarded.strip():
        address = forwarded.split(",")[0]
    try:
        return str(ipaddress.ip_address(address.strip()))
    except ValueError:
        return None


def audit_changes(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, list[Any]]:
    """{field: [before, after]} for each field whose value differs (a field missing on one side is None there)."""
    return {name: [before.get(name), after.get(name)] for name in sorted({*before, *after}) if before.get(name) != after.get(name)}


def audit_record(
    *,
    actor: User | AnonymousUser | None,
    action: str,
    target: Model,
    changes: Mapping[str, Any],
    request: HttpRequest | Any | None = None,
    job: Model | None = None,
    target_repr: str | None = None,
) -> AuditEntry:
    """Record that `actor` did `action` to `target`, with the fields it changed as {field: [before, after]}.

    `request` gives the address it came from; `job` links the entry to a job, so the
    job's owner sees it. `target_repr` overrides how the target is named (default: str()).
    """
    if action not in ACTIONS:
        # Unlisted, the filters would refuse it: add it to audit.models.ACTIONS (and docs/admin.md's table).
        raise ValueError(f"{action} is not an audit action: audit.models.ACTIONS lists them.")
    target_type = target._meta.model_name or ""
    if target_type not in TARGET_TYPES:
        # Unlisted, no filter would find it: add it to audit.models.TARGET_TYPES (and docs/admin.md).
        raise ValueError(f"An audit entry about a {target_type or 'nameless model'} is not one of {', '.join(TARGET_TYPES)}.")
    if actor is not None and not actor.is_authenticated:
        actor = None
    return AuditEntry.objects.create(
        actor=actor,
        actor_username=actor.get_username() if actor is not None else "",
        action=action,
        target_type=target_type,
        target_id=str(target.pk),
        target_repr=(target_repr if target_repr is not None else str(target))[:200],
        changes=dict(changes),
        remote_addr=client_address(request),
        job=job,  # type: ignore[misc]  # a Job: audit is a lower layer, it cannot import jobs to say so
    )
