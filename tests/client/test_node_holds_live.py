"""`muster nodes hold` / `muster nodes release` (admins), over POST /api/v1/nodes/hold/ and /release/: Slurm's
`scontrol update NodeName=... State=DRAIN Reason=...` and `State=RESUME`, which Django admin's node list alone offered."""

from __future__ import annotations

import re
from typing import Any

import pytest
from muster_client import config, render

from accounts.services import token_create
from audit.models import AuditEntry
from jobs.models import Allocation, Node
from tests.client.cli_run import run_live as run
from tests.conftest import SimHarness

IMAGE = "nvcr.io/nvidia/pytorch:24.05-py3"


def test_an_admin_holds_and_releases_nodes_from_the_cli(
    signed_in: Any, tx_sim: SimHarness, django_user_model: Any, live_server: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "submit", "-G", "8", "-t", "1h", "--image", IMAGE, "-J", "tune", "--", "python", "t.py")
    assert code == 0, err
    job_id = int(re.search(r"(\d+)", out).group(1))  # type: ignore[union-attr]
    tx_sim.cycle()
    busy = Allocation.objects.get(job_id=job_id).node.name
    idle = Node.objects.exclude(name=busy).filter(sharing="").order_by("name").values_list("name", flat=True)[0]

    # A researcher may not.
    code, _, err = run(capsys, "nodes", "hold", idle, "-r", "mine now")
    assert code == 4 and err.strip() == "muster: error: not allowed: Only admins hold and release nodes."
    assert not Node.objects.filter(held=True).exists()

    admin = django_user_model.objects.create_user(username="root", password="x", is_staff=True)
    config.save_token(live_server.url, token_create(user=admin, name="cli").secret)
    # Said before anything is sent: a hold needs its reason (users waiting for the node read it).
    code, _, err = run(capsys, "nodes", "hold", idle)
    assert code == 2 and "say why the nodes are held (-r REASON)" in err
    # A name the cluster does not have holds none of them.
    code, _, err = run(capsys, "nodes", "hold", idle, "gpu-99", "-r", "PSU swap")
    assert code == 5 and "No node gpu-99 in the cluster: nothing was held or released." in err
    assert not Node.objects.filter(held=True).exists()

    code, out, err = run(capsys, "nodes", "hold", busy, idle, "-r", "PSU swap, back Monday")
    assert code == 0, err
    first, second = sorted([busy, idle])
    assert out.strip() == (
        f"Held {first}, {second}: nothing new is placed there. Jobs keep running there until they end: {busy}: job {job_id}."
    )
    assert set(Node.objects.filter(held=True).values_list("name", "held_reason")) == {
        (busy, "PSU swap, back Monday"),
        (idle, "PSU swap, back Monday"),
    }
    assert sorted(AuditEntry.objects.filter(action="node.hold").values_list("target_repr", "actor_username")) == [
        (first, "root"),
        (second, "root"),
    ]
    code, out, _ = run(capsys, "nodes")
    assert re.search(rf"^{idle}\s.*HELD \(PSU swap, back Monday\)", out, re.M), out

    other = Node.objects.filter(held=False, sharing="").order_by("name").values_list("name", flat=True)[0]
    code, out, err = run(capsys, "nodes", "release", busy, idle, other)
    assert code == 0
    assert out.strip() == f"Released {first}, {second}: new work may be placed there again (failure count reset)."
    assert err.strip() == f"muster: not held, left as they were: {other}"
    assert not Node.objects.filter(held=True).exists()

    # A node list as muster queue's NODELIST and squeue write it (sim-node-[001-002]), as scontrol takes NodeName=.
    pair = list(Node.objects.filter(held=False, sharing="").order_by("name").values_list("name", flat=True)[:2])
    written = render.hostlist(pair)
    assert "[" in written
    code, out, err = run(capsys, "nodes", "hold", written, "-r", "rack work")
    assert code == 0, err
    assert out.strip() == f"Held {pair[0]}, {pair[1]}: nothing new is placed there."
    assert sorted(Node.objects.filter(held=True).values_list("name", flat=True)) == pair
    code, _, err = run(capsys, "nodes", "release", "sim-node-[3-1]")
    assert code == 2 and "'3-1' is not a number or a rising range (write gpu-[00-03,07])" in err
    assert Node.objects.filter(held=True).count() == 2
