"""Django admin's node list holds and releases many nodes at once ("Hold selected nodes", "Release selected nodes"), a
hold with its reason as a node's own page takes it, and says which jobs run on there until they end (Slurm's drain)."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.messages import get_messages
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from audit.models import AuditEntry
from jobs.models import Node
from tests.conftest import session_for
from tests.jobs.factories import JobFactory, NodeFactory

NODES = "/admin/jobs/node/"


@pytest.fixture
def admin(admin_user: Any) -> Client:
    return session_for(admin_user)


def pick(action: str, *nodes: Node) -> dict[str, Any]:
    """The node list's action form, as the browser posts it: the action, the ticked rows, the bar's index."""
    return {"action": action, "_selected_action": [n.pk for n in nodes], "index": 0}


def said(response: Any) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


def test_hold_selected_asks_why_then_holds_every_node_and_names_the_jobs_that_run_on(admin: Client, user: Any) -> None:
    a, b, c = NodeFactory(name="gpu-07"), NodeFactory(name="gpu-08"), NodeFactory(name="gpu-09")
    first = JobFactory(owner=user, running=True, held=[a])
    second = JobFactory(owner=user, running=True, gpus_per_node=4, held=[(a, 4)])
    third = JobFactory(owner=user, running=True, held=[b])
    JobFactory(owner=user, finished=True, held=[c])  # ended: it holds nothing there
    # The list's action asks for the reason first, listing the nodes and what runs there.
    asked = admin.post(NODES, pick("hold_selected", a, b, c))
    assert asked.status_code == 200
    page = asked.content.decode()
    assert 'name="held_reason"' in page and 'value="Hold 3 nodes"' in page
    assert f"gpu-07: job {first.pk}, job {second.pk} running there, until they end" in page
    assert not Node.objects.filter(held=True).exists()
    # Without a reason nothing is held: users waiting for the nodes read it.
    confirm = {"action": "hold_selected", "_selected_action": [a.pk, b.pk, c.pk], "apply": "yes"}
    refused = admin.post(NODES, {**confirm, "held_reason": "  "})
    assert refused.status_code == 200 and "Say why the nodes are held: users waiting for them read this." in refused.content.decode()
    assert not Node.objects.filter(held=True).exists()
    done = admin.post(NODES, {**confirm, "held_reason": " rack 2 PDU swap, back 14:00 "}, follow=True)
    assert done.redirect_chain == [(NODES, 302)]
    assert list(Node.objects.order_by("name").values_list("name", "held", "held_reason")) == [
        ("gpu-07", True, "rack 2 PDU swap, back 14:00"),
        ("gpu-08", True, "rack 2 PDU swap, back 14:00"),
        ("gpu-09", True, "rack 2 PDU swap, back 14:00"),
    ]
    assert said(done) == [
        "Held gpu-07, gpu-08, gpu-09: nothing new is placed there.",
        "Jobs keep running there until they end (a hold places nothing new, and stops nothing): "
        f"gpu-07: jobs {first.pk}, {second.pk}; gpu-08: job {third.pk}. To free the nodes sooner, cancel those jobs.",
    ]
    assert list(AuditEntry.objects.order_by("target_repr").values_list("action", "target_repr", "actor_username")) == [
        ("node.hold", "gpu-07", "root"),
        ("node.hold", "gpu-08", "root"),
        ("node.hold", "gpu-09", "root"),
    ]


def test_holding_nodes_held_already_rewords_their_hold(admin: Client) -> None:
    held = NodeFactory(name="gpu-01", held=True, held_reason="fan noise", failures_in_row=2)
    fresh = NodeFactory(name="gpu-02")
    confirm = {"action": "hold_selected", "_selected_action": [held.pk, fresh.pk], "apply": "yes"}
    done = admin.post(NODES, {**confirm, "held_reason": "BIOS update"})
    assert done.status_code == 302
    held.refresh_from_db()
    assert (held.held, held.held_reason, held.failures_in_row) == (True, "BIOS update", 2)
    assert said(done) == ["Held gpu-02: nothing new is placed there; node gpu-01 was held already: its reason is now this one."]
    # Held again alone, the message starts with the word, not the node's name: Django admin capitalises a message's first
    # letter, and it read "Gpu-01, gpu-02 were held already".
    page = admin.post(NODES, {**confirm, "held_reason": "BIOS update"}, follow=True).content.decode()
    assert "Nodes gpu-01, gpu-02 were held already, for this reason." in page and "Gpu-0" not in page
    assert list(AuditEntry.objects.order_by("target_repr").values_list("action", "changes")) == [
        ("node.update", {"held_reason": ["fan noise", "BIOS update"]}),
        ("node.hold", {"held": [False, True], "held_reason": ["", "BIOS update"]}),
    ]


def test_release_selected_releases_with_a_fresh_count_and_says_which_were_not_held(admin: Client) -> None:
    a = NodeFactory(name="gpu-07", held=True, held_reason="PSU", failures_in_row=3)
    b = NodeFactory(name="gpu-08", held=True, held_reason="PSU")
    free = NodeFactory(name="gpu-09")
    done = admin.post(NODES, pick("release_selected", a, b, free))
    assert done.status_code == 302
    assert list(Node.objects.order_by("name").values_list("held", "held_reason", "failures_in_row")) == [
        (False, "", 0),
        (False, "", 0),
        (False, "", 0),
    ]
    assert said(done) == [
        "Released gpu-07, gpu-08: new work may be placed there again (failure count reset).",
        "Not held, left as they were: gpu-09.",
    ]
    assert list(AuditEntry.objects.order_by("target_repr").values_list("action", "target_repr")) == [
        ("node.release", "gpu-07"),
        ("node.release", "gpu-08"),
    ]


def test_a_hold_on_a_nodes_own_page_names_the_jobs_that_run_on_there(admin: Client, user: Any) -> None:
    node = NodeFactory(name="gpu-07")
    job = JobFactory(owner=user, running=True, held=[node])
    done = admin.post(f"{NODES}{node.pk}/change/", {"held": "on", "held_reason": "GPU 3 replaced"})
    assert done.status_code == 302
    assert (
        f"Jobs keep running there until they end (a hold places nothing new, and stops nothing): gpu-07: job {job.pk}. "
        "To free the node sooner, cancel those jobs."
    ) in said(done)


def node_row(page: str, name: str) -> str:
    """The node list's row of one node (its cells, up to the next row)."""
    start = page.index(f">{name}</a>")
    return page[start : page.index("</tr>", start)]


def test_the_node_list_shows_gpus_in_use_and_links_the_jobs_on_each_node_in_one_query(admin: Client, user: Any) -> None:
    """An admin choosing which node to hold saw no jobs or GPUs in use per node: the list says `6 / 8` and `2 jobs`,
    linked to those jobs, summed in the list's own query however many nodes it shows."""
    a, b = NodeFactory(name="gpu-07", gpus_total=8), NodeFactory(name="gpu-08", gpus_total=8)
    NodeFactory(name="gpu-09", gpus_total=8, gpus_foreign=1)
    first = JobFactory(owner=user, running=True, gpus_per_node=2, held=[(a, 2)])
    gang = JobFactory(owner=user, running=True, nodes=2, gpus_per_node=4, held=[(a, 4), (b, 4)])  # two ranks, one on each
    JobFactory(owner=user, finished=True, held=[(b, 8)])  # ended: it holds nothing now
    JobFactory(owner=user, running=True, held=[(NodeFactory(name="mig-01", gpus_total=8, sharing="mig"), 0.25)])

    def list_page() -> tuple[str, int]:
        with CaptureQueriesContext(connection) as queries:
            response = admin.get(NODES)
        assert response.status_code == 200
        return response.content.decode(), len(queries)

    page, queries = list_page()
    row = node_row(page, "gpu-07")
    assert '<td class="field-gpus_in_use">6 / 8</td>' in row
    assert '<a href="/admin/jobs/job/?node=gpu-07">2 jobs</a>' in row
    assert '<a href="/admin/jobs/job/?node=gpu-08">1 job</a>' in node_row(page, "gpu-08")
    assert '<td class="field-gpus_in_use">4 / 8</td>' in node_row(page, "gpu-08")
    assert "0 / 8 (+1 GPU of other pods)" in node_row(page, "gpu-09") and "none" in node_row(page, "gpu-09")
    assert "0.25 / 8" in node_row(page, "mig-01")
    # The link lists the jobs on that node now, no other (the gang once, though it has a rank there and one elsewhere).
    jobs = admin.get("/admin/jobs/job/?node=gpu-07").content.decode()
    assert "2 results" in jobs or "2 jobs" in jobs
    assert f"/admin/jobs/job/{first.pk}/change/" in jobs and f"/admin/jobs/job/{gang.pk}/change/" in jobs
    on_b = admin.get("/admin/jobs/job/?node=gpu-08").content.decode()
    assert f"/admin/jobs/job/{gang.pk}/change/" in on_b and f"/admin/jobs/job/{first.pk}/change/" not in on_b
    # No query per row: ten more busy nodes cost the list nothing more.
    for i in range(10):
        JobFactory(owner=user, running=True, held=[(NodeFactory(name=f"gpu-{20 + i}", gpus_total=8), 8)])
    assert list_page()[1] == queries
    # A node's own page says the same.
    own = admin.get(f"{NODES}{a.pk}/change/").content.decode()
    assert "6 / 8" in own and '<a href="/admin/jobs/job/?node=gpu-07">2 jobs</a>' in own
