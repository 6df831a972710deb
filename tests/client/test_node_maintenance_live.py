"""`muster nodes maint` (admins), over /api/v1/nodes/maintenance/: Slurm's `scontrol create reservation ... flags=maint`,
`show reservation` and `delete reservation`, against a live server."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from muster_client import config

from accounts.services import token_create
from audit.models import AuditEntry
from jobs.models import Allocation, MaintenanceWindow, Node
from tests.client.cli_run import run_live as run
from tests.conftest import SimHarness

IMAGE = "nvcr.io/nvidia/pytorch:24.05-py3"


def _local(at: datetime) -> str:
    """As an admin types it: local time, to the minute."""
    return at.astimezone().strftime("%Y-%m-%d %H:%M")


def test_an_admin_plans_lists_and_cancels_maintenance_from_the_cli(
    signed_in: Any, tx_sim: SimHarness, django_user_model: Any, live_server: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    # Four hours: it would still run when the window starts in three.
    code, out, err = run(capsys, "submit", "-G", "8", "-t", "4h", "--image", IMAGE, "-J", "tune", "--", "python", "t.py")
    assert code == 0, err
    job_id = int(re.search(r"(\d+)", out).group(1))  # type: ignore[union-attr]
    tx_sim.cycle()
    busy = Allocation.objects.get(job_id=job_id).node.name
    idle = Node.objects.exclude(name=busy).filter(sharing="").order_by("name").values_list("name", flat=True)[0]
    start = (datetime.now(UTC) + timedelta(hours=3)).replace(second=0, microsecond=0)

    # A researcher may list, not plan.
    code, out, _ = run(capsys, "nodes", "maint", "--list")
    assert code == 0 and out.strip() == "No maintenance planned."
    code, _, err = run(capsys, "nodes", "maint", idle, "--start", _local(start), "--duration", "8h", "-r", "firmware")
    assert code == 4 and err.strip() == "muster: error: not allowed: Only admins schedule and cancel maintenance."

    admin = django_user_model.objects.create_user(username="root", password="x", is_staff=True)
    config.save_token(live_server.url, token_create(user=admin, name="cli").secret)
    # Said before anything is sent.
    code, _, err = run(capsys, "nodes", "maint", idle, "--start", _local(start), "--duration", "8h")
    assert code == 2 and "say why the nodes go into maintenance (-r REASON)" in err
    code, _, err = run(capsys, "nodes", "maint", idle, "--start", _local(start), "-r", "firmware")
    assert code == 2 and "--duration 8h, or when it ends" in err
    code, _, err = run(capsys, "nodes", "maint", idle, "--start", "tomorrow", "--duration", "8h", "-r", "firmware")
    assert code == 2 and "'tomorrow' is not a time" in err
    code, _, err = run(capsys, "nodes", "hold", idle, "--duration", "8h", "-r", "x")
    assert code == 2 and "--duration is for maintenance" in err
    # The server's refusals, in its words: a start in the past, an end before the start.
    code, _, err = run(capsys, "nodes", "maint", idle, "--start", _local(start - timedelta(hours=4)), "--duration", "1h", "-r", "x")
    assert code == 5 and "is in the past" in err
    code, _, err = run(capsys, "nodes", "maint", idle, "--start", _local(start), "--end", _local(start - timedelta(hours=1)), "-r", "x")
    assert code == 5 and "is not after the start" in err
    assert not MaintenanceWindow.objects.exists()

    # Both nodes, as squeue writes them or one by one; the job running on one is named.
    code, out, err = run(capsys, "nodes", "maint", busy, idle, "--start", _local(start), "--duration", "8h", "-r", "firmware")
    assert code == 0, err
    window = MaintenanceWindow.objects.get()
    assert (window.starts_at, window.ends_at, window.reason) == (start, start + timedelta(hours=8), "firmware")
    assert sorted(window.nodes.values_list("name", flat=True)) == sorted([busy, idle])
    assert out.startswith(f"Maintenance window {window.pk}: ")
    assert f"jobs running there now, which run on if still there at the start: {busy}: job {job_id}" in err
    assert AuditEntry.objects.filter(action="node.maintenance").count() == 2

    # Overlapping the first on one of its nodes: refused, naming it.
    code, _, err = run(capsys, "nodes", "maint", idle, "--start", _local(start + timedelta(hours=1)), "--duration", "1h", "-r", "x")
    assert code == 5 and f"{idle} is in maintenance window {window.pk} already" in err

    code, out, _ = run(capsys, "nodes", "maint", "--list")
    assert code == 0
    header, row = out.strip().splitlines()
    assert header.split()[:5] == ["ID", "NODES", "START", "END", "STATE"]
    assert row.split()[0] == str(window.pk) and "planned" in row and "firmware" in row and row.rstrip().endswith(str(job_id))

    # `muster nodes` says it on each node, with the job that runs on into it.
    code, out, _ = run(capsys, "nodes")
    assert code == 0
    assert re.search(rf"^{busy}\s.*MAINT from .* \(firmware; job {job_id} in the way\)", out, re.M), out
    assert re.search(rf"^{idle}\s.*MAINT from .* \(firmware\)", out, re.M), out

    code, out, err = run(capsys, "nodes", "maint", "--cancel", str(window.pk))
    assert code == 0, err
    assert out.strip().startswith(f"Cancelled maintenance window {window.pk}")
    code, out, _ = run(capsys, "nodes", "maint", "--list")
    assert out.strip() == "No maintenance planned."
    assert AuditEntry.objects.filter(action="node.maintenance_cancel").count() == 2
