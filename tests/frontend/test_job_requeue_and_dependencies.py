"""A job's page: Requeue for a placed or running job (`muster requeue [--hold]`), the jobs it waits for and those that
wait for it (`sbatch --dependency`); the submit form's Start after, read as `muster submit -d` reads it."""

from __future__ import annotations

import re
from typing import Any

import pytest

from audit.models import AuditEntry
from jobs.dependencies import DependencyTextInvalid, dependencies_parse
from jobs.models import Job
from jobs.states import JobState
from tests.conftest import SimHarness, job_payload, session_for
from tests.frontend.forms import submit_form


def test_requeue_from_the_job_page_with_a_reason_and_a_hold(
    user: Any, admin_user: Any, submit: Any, sim: SimHarness, django_capture_on_commit_callbacks: Any
) -> None:
    job_id = submit(nodes=1, simulate={"duration_seconds": 600})["id"]
    page = session_for(user)
    # Pending: no Requeue (it is queued already).
    assert 'data-testid="requeue"' not in page.get(f"/jobs/{job_id}/").content.decode()
    sim.cycle()
    sim.advance(2)
    shown = page.get(f"/jobs/{job_id}/").content.decode()
    assert 'data-testid="requeue"' in shown and f'action="/jobs/{job_id}/requeue/"' in shown
    with django_capture_on_commit_callbacks(execute=True):
        done = page.post(f"/jobs/{job_id}/requeue/", {"reason": "bad data shard"}, follow=True).content.decode()
    assert f"Job {job_id} requeued: its attempt 1 was stopped; it waits in the queue again, in its place." in done
    job = Job.objects.get(pk=job_id)
    assert (job.state, job.pending_reason, job.restarts, job.hold) == ("PENDING", "Requeued by alice: bad data shard.", 0, "")
    assert not sim.cluster.observe_gangs()
    assert 'data-testid="requeue"' not in done and 'data-testid="hold"' in done
    # A stale page's Requeue is refused in the API's 409 words, on the page.
    stale = page.post(f"/jobs/{job_id}/requeue/", follow=True).content.decode()
    assert f"Job {job_id} is PENDING: only a placed or running job can be requeued; it is queued already." in stale

    # "and hold it": held in the same step, not started by the next cycle; an admin's is audited, both.
    sim.cycle()
    sim.advance(2)
    with django_capture_on_commit_callbacks(execute=True):
        done = session_for(admin_user).post(f"/jobs/{job_id}/requeue/", {"hold": "1"}, follow=True).content.decode()
    assert f"Job {job_id} requeued and held: its attempt 2 was stopped; it is not started until released." in done
    job = Job.objects.get(pk=job_id)
    assert (job.state, job.hold, job.pending_reason_code) == ("PENDING", "admin", "HELD")
    assert sim.cycle().placed == []
    assert sorted(AuditEntry.objects.values_list("action", flat=True)) == ["job.hold", "job.requeue"]
    # Ended: no Requeue, and a POST says why.
    session_for(admin_user).post(f"/jobs/{job_id}/cancel/")
    assert 'data-testid="requeue"' not in page.get(f"/jobs/{job_id}/").content.decode()
    ended = page.post(f"/jobs/{job_id}/requeue/", follow=True).content.decode()
    assert f"Job {job_id} has already ended (CANCELLED); only a placed or running job can be requeued (resubmit it)." in ended


def test_another_users_job_cannot_be_requeued_from_the_page(user: Any, other_user: Any, submit: Any, sim: SimHarness) -> None:
    job_id = submit(nodes=1)["id"]
    sim.cycle()
    assert session_for(other_user).post(f"/jobs/{job_id}/requeue/").status_code == 404
    assert session_for(user).get(f"/jobs/{job_id}/requeue/").status_code == 405
    assert Job.objects.get(pk=job_id).state == JobState.SCHEDULED


def listed(page: str, testid: str) -> list[str]:
    """The text of each item of a list on the page, tags dropped and spaces squeezed."""
    block = re.search(rf'data-testid="{testid}">(.*?)</dd>', page, re.S)
    assert block, f"no {testid} on the page"
    items = re.findall(r"<li[^>]*>(.*?)</li>", block.group(1), re.S) or [block.group(1)]
    return [re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", item)).strip() for item in items]


def test_the_job_page_shows_what_it_waits_for_and_the_jobs_waiting_for_it(
    user: Any, admin_user: Any, submit: Any, sim: SimHarness, settings: Any
) -> None:
    settings.MUSTER_LIVE_REFRESH_SECONDS = 1
    prep = submit(name="prep", nodes=1, simulate={"duration_seconds": 30})
    doomed = submit(name="doomed", nodes=1, simulate={"duration_seconds": 5, "exit_code": 3})
    sim.cycle()
    sim.advance(2)
    train = submit(
        name="train",
        nodes=1,
        dependencies=[{"type": "afterok", "job": prep["id"]}, {"type": "afternotok", "job": doomed["id"]}],
    )
    sim.advance(2)
    page = session_for(user)
    shown = page.get(f"/jobs/{train['id']}/").content.decode()
    assert listed(shown, "dependencies") == [
        f"job {prep['id']} (prep), once it has succeeded (afterok): not met yet: it is RUNNING",
        f"job {doomed['id']} (doomed), once it has failed, timed out or been cancelled (afternotok): not met yet: it is RUNNING",
    ]
    assert "0 of 2 met, 2 not yet." in shown and f'href="/jobs/{prep["id"]}/"' in shown
    # Its status line says why it waits, as the queue does, where the reason's code reads as the others'.
    assert (
        f"Waits for job {prep['id']} to succeed (afterok; it is RUNNING) and job {doomed['id']} to fail (afternotok; it is RUNNING)."
        in shown
    )
    assert "<code>DEPENDENCY</code>" in page.get("/cluster/").content.decode()
    # The job waited for lists it, linked.
    assert listed(page.get(f"/jobs/{prep['id']}/").content.decode(), "dependents") == [f"job {train['id']} (train, afterok, PENDING)"]

    # doomed fails: that ask is met; then prep succeeds. The page keeps up in place (a live part).
    sim.advance(10)
    live = page.get(f"/jobs/{train['id']}/live/").json()["parts"]["job-dependencies"]
    assert "1 of 2 met, 1 not yet." in live
    sim.advance(30)
    assert Job.objects.get(pk=prep["id"]).state == JobState.SUCCEEDED
    assert "2 of 2 met." in page.get(f"/jobs/{train['id']}/live/").json()["parts"]["job-dependencies"]


def test_an_arrays_elements_read_as_one_entry_named_as_slurm_names_them_both_ways(
    user: Any, api: Any, submit: Any, sim: SimHarness
) -> None:
    sweep = api.post("/api/v1/jobs/array/", {**_payload(), "array": "0-9"}, format="json").json()
    other = api.post("/api/v1/jobs/array/", {**_payload(), "array": "0-1"}, format="json").json()
    array_id, elements, element = sweep["array_id"], sweep["jobs"], other["jobs"][1]
    train = submit(
        name="train",
        nodes=1,
        dependencies=[{"type": "afterok", "job": array_id}, {"type": "afterany", "job": f"{other['array_id']}_1"}],
    )
    page = session_for(user)
    shown = page.get(f"/jobs/{train['id']}/").content.decode()
    # Ten elements in one entry, linked to the array's list (not ten lines, cut at twenty); one element by its name.
    assert listed(shown, "dependencies") == [
        f"{array_id}_[0-9] (sweep), once each has succeeded (afterok): not met yet: 0 of 10 met; 10 are PENDING",
        f"job {element['id']} ({other['array_id']}_1, sweep), once it has ended, whatever way (afterany): not met yet: it is PENDING",
    ]
    assert "0 of 11 met, 11 not yet." in shown and f'href="/?array={array_id}"' in shown
    api.post(f"/api/v1/jobs/{elements[9]['id']}/cancel/")
    shown = page.get(f"/jobs/{train['id']}/").content.decode()
    assert listed(shown, "dependencies")[0] == (
        f"{array_id}_[0-9] (sweep), once each has succeeded (afterok): never met: 1 of 10 ended CANCELLED, so this job is "
        "cancelled at the next scheduling cycle"
    )
    assert "0 of 11 met, 10 not yet, 1 never will be." in shown
    # A job an array waits for lists the array's elements as one entry too.
    after = {**_payload(), "array": "0-2", "dependencies": [{"type": "afterany", "job": train["id"]}]}
    waiting = api.post("/api/v1/jobs/array/", after, format="json").json()["array_id"]
    assert listed(page.get(f"/jobs/{train['id']}/").content.decode(), "dependents") == [f"{waiting}_[0-2] (sweep, afterany, 3 PENDING)"]


def test_a_dependency_never_met_says_the_job_is_cancelled_for_it(user: Any, api: Any, submit: Any, sim: SimHarness) -> None:
    prep = submit(name="prep", nodes=1)
    waits = submit(name="waits", nodes=1, dependencies=[{"type": "afterok", "job": prep["id"]}])
    assert api.post(f"/api/v1/jobs/{prep['id']}/cancel/").status_code == 200
    # Before the next cycle has cancelled it: why it will be.
    shown = session_for(user).get(f"/jobs/{waits['id']}/").content.decode()
    assert listed(shown, "dependencies") == [
        f"job {prep['id']} (prep), once it has succeeded (afterok): never met: it ended CANCELLED, so this job is "
        "cancelled at the next scheduling cycle"
    ]
    sim.cycle()
    assert Job.objects.get(pk=waits["id"]).state == JobState.CANCELLED
    shown = session_for(user).get(f"/jobs/{waits['id']}/").content.decode()
    assert listed(shown, "dependencies") == [f"job {prep['id']} (prep), once it has succeeded (afterok): never met: it ended CANCELLED"]
    assert f"its dependency afterok:{prep['id']} can never be met (job {prep['id']} ended CANCELLED)." in shown


def test_an_admins_job_waiting_for_someones_job_is_not_named_to_them(
    user: Any, admin_user: Any, admin_api: Any, submit: Any, sim: SimHarness
) -> None:
    theirs = submit(name="alices", nodes=1)
    response = admin_api.post(
        "/api/v1/jobs/",
        {
            "name": "roots",
            "image": "nvcr.io/nvidia/pytorch:24.05-py3",
            "command": ["x"],
            "nodes": 1,
            "gpus_per_node": 8,
            "wall_time_seconds": 600,
            "dependencies": [{"type": "afterany", "job": theirs["id"]}],
        },
        format="json",
    )
    assert response.status_code == 201, response.content
    # Alice's page counts the admin's job waiting for hers without naming or linking it; the admin's names hers.
    shown = session_for(user).get(f"/jobs/{theirs['id']}/").content.decode()
    assert listed(shown, "dependents") == ["1 job you may not see"]
    assert "roots" not in shown
    admins = session_for(admin_user).get(f"/jobs/{response.json()['id']}/").content.decode()
    assert listed(admins, "dependencies")[0].startswith(f"job {theirs['id']} (alices), once it has ended, whatever way (afterany)")


@pytest.mark.parametrize(
    ("text", "asked"),
    [
        ("afterok:12:13,afterany:14", [("afterok", 12, None), ("afterok", 13, None), ("afterany", 14, None)]),
        (" afternotok:7 , afterok:8 ", [("afternotok", 7, None), ("afterok", 8, None)]),
        # Slurm's ARRAYID_INDEX: one element of an array.
        ("afterok:12_3:13,afterany:14_0", [("afterok", 12, 3), ("afterok", 13, None), ("afterany", 14, 0)]),
        ("", []),
    ],
)
def test_start_after_reads_sbatch_dependency_text_as_the_cli_does(text: str, asked: list[tuple[str, int, int | None]]) -> None:
    assert dependencies_parse(text) == asked


def test_start_after_says_every_mistake_at_once() -> None:
    with pytest.raises(DependencyTextInvalid) as refused:
        dependencies_parse("after:12,afterok,afterok:x,afterany:0,")
    assert refused.value.problems == [
        "'after:12': the types are afterok, afterany, afternotok, as TYPE:ID[:ID...] (e.g. afterok:12); Slurm's after, "
        "aftercorr and singleton are not supported.",
        "'afterok': give job ids after the type, as afterok:12, afterok:12:13 or afterok:12_1 (an array's element).",
        "'afterok:x': give job ids after the type, as afterok:12, afterok:12:13 or afterok:12_1 (an array's element).",
        "'afterany:0': job ids start at 1.",
        "An empty entry (a comma too many): write TYPE:ID[:ID...], e.g. afterok:12,afterany:14.",
    ]
    with pytest.raises(DependencyTextInvalid, match=r"not for any one of them \('\?'\)"):
        dependencies_parse("afterok:1?afterok:2")


def test_the_submit_forms_start_after_queues_the_job_behind_them_and_a_clone_keeps_it(
    user: Any, api: Any, submit: Any, sim: SimHarness
) -> None:
    prep = submit(name="prep", nodes=1, simulate={"duration_seconds": 600})
    sim.cycle()
    sim.advance(2)
    array = api.post("/api/v1/jobs/array/", {**_payload(), "array": "0-2"}, format="json").json()
    page = session_for(user)
    # The estimate beside Submit waits for the jobs named, from when they are expected to end.
    body = page.post("/jobs/new/estimate/", submit_form(nodes="1", dependencies=f"afterok:{prep['id']}")).json()
    assert (body["accepted"], body["errors"]) == (True, 0) and body["start"] != "now"
    assert f"Waits for job {prep['id']} to succeed (afterok; it is RUNNING)." in body["html"] and "Would start now" not in body["html"]
    # The API's estimate (`muster submit --test-only -d`) alike: it said "now", as if the job waited for nothing.
    asked = api.post("/api/v1/jobs/estimate/", job_payload(nodes=1, dependencies=[{"type": "afterok", "job": prep["id"]}]), format="json")
    assert asked.status_code == 200 and asked.json()["start"]["reason_code"] == "DEPENDENCY"
    # Mistakes in the form's words, on the field, with the API's for a job it cannot see, one round.
    refused = page.post("/jobs/new/", submit_form(dependencies="afterok:99999")).context["form"].errors
    assert refused["dependencies"] == ["No job 99999 (or none that you may see)."]
    refused = page.post("/jobs/new/", submit_form(dependencies="after:1,afterok")).context["form"].errors
    assert len(refused["dependencies"]) == 2 and refused["dependencies"][1].startswith("'afterok': give job ids")
    assert not Job.objects.filter(name="train").exists()
    text = f"afterok:{prep['id']},afterany:{array['array_id']}"
    response = page.post("/jobs/new/", submit_form(nodes="1", dependencies=text))
    job = Job.objects.get(name="train")
    assert response["Location"] == f"/jobs/{job.pk}/"
    assert sorted(job.dependencies.values_list("kind", "on_id")) == sorted(
        [("afterok", prep["id"]), *(("afterany", element["id"]) for element in array["jobs"])]
    )
    # Clone writes them back as they were asked: the array by its id, not its elements one by one.
    form = page.get(f"/jobs/new/?clone={job.pk}").content.decode()
    assert f'value="{text}"' in form
    clone = page.post("/jobs/new/", {**submit_form(nodes="1", name="again"), "dependencies": text})
    assert clone.status_code == 302 and Job.objects.get(name="again").dependencies.count() == 4


def _payload() -> dict[str, Any]:
    return {
        "name": "sweep",
        "image": "nvcr.io/nvidia/pytorch:24.05-py3",
        "command": ["x"],
        "nodes": 1,
        "gpus_per_node": 1,
        "wall_time_seconds": 600,
    }
