"""The submit form's server side: one round of errors, the estimate's JSON, and a signed-out submit kept for after the sign-in."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client

from audit.models import AuditEntry
from jobs.models import Job, JobEvent
from quotas.models import Quota, TeamVolume, UsageCharge
from tests.conftest import PASSWORD, make_sim, session_for
from tests.frontend.forms import submit_form
from tests.jobs.factories import JobFactory
from tests.quotas.factories import TeamFactory

pytestmark = pytest.mark.django_db


def test_field_errors_cross_field_errors_and_limits_come_in_one_round(user: Any, sim: Any) -> None:
    Quota.objects.create(user=user, max_gpus=8, max_wall_time_seconds=3600, max_node_hours_per_job=1)
    page = session_for(user).post("/jobs/new/", submit_form(image="Not A Ref", min_nodes="3", wall_time_minutes="90"))
    errors = page.context["form"].errors
    assert set(errors) == {"image", "min_nodes", "nodes", "wall_time_minutes"}
    # Elastic 3..2 is a mistake across two fields, said on the one that makes it elastic; the quota's limits are checked
    # beside it anyway.
    assert errors["min_nodes"] == ["An elastic job runs on at least this many nodes and at most Nodes (2): give 2 or fewer."]
    assert any("allows at most 8 at once" in e for e in errors["nodes"])
    assert errors["wall_time_minutes"] == ["Your quota (user alice) allows at most 60 minutes (1 h) per job; you asked for 90."]
    assert not Job.objects.exists()


def test_an_empty_or_out_of_range_field_says_what_it_needs_not_djangos_words(user: Any, settings: Any) -> None:
    """ "Ensure this value is greater than or equal to 1." and "This field is required." were said among the form's own."""
    make_sim(settings, shared="time-slicing:4:1")  # a GPU share to offer
    form = submit_form(
        command="", nodes="0", gpus_per_node="0", wall_time_minutes="0", max_restarts="-1", sim_duration_seconds="-5",
        sim_exit_code="300", gpu_fraction="1.5",
    )  # fmt: skip
    errors = session_for(user).post("/jobs/new/", form).context["form"].errors
    assert errors["command"] == ["The command cannot be empty: give the program to run, e.g. torchrun train.py."]
    assert errors["nodes"] == ["A job needs at least 1 node."]
    assert errors["gpus_per_node"] == ["A job needs at least 1 GPU per node; for part of one, give a GPU share."]
    assert errors["wall_time_minutes"] == ["A job needs a wall time of at least 1 minute."]
    assert errors["max_restarts"] == ["Give 0 or more restarts: 0 means a failed job is not started again."]
    assert errors["sim_duration_seconds"] == ["A simulated run time is 0 seconds or more; leave it empty for the default."]
    assert errors["sim_exit_code"] == ["An exit code is from 0 to 255: 0 succeeds, anything else fails."]
    assert errors["gpu_fraction"] == ["A GPU share is part of one GPU, from 0.01 to 0.99; for whole GPUs leave it empty."]
    blank = session_for(user).post("/jobs/new/", submit_form(name="", image="", nodes="", gpus_per_node="")).context["form"].errors
    assert blank["name"] == ["Give the job a name: any label of yours."]
    assert blank["image"] == ["Give the container image to run, e.g. nvcr.io/nvidia/pytorch:24.05-py3."]
    assert blank["nodes"] == ["A job needs at least 1 node."]
    assert blank["gpus_per_node"] == errors["gpus_per_node"]
    said = " ".join(str(e) for errs in [*errors.values(), *blank.values()] for e in errs)
    assert "Ensure this value" not in said and "This field is required" not in said


def test_every_bad_line_of_env_and_volumes_and_gpus_beyond_any_node_are_said_in_the_first_round(user: Any, sim: Any) -> None:
    """Only "Line 2 has no '='" was said; the bad names and the 99 GPUs came one submit later."""
    team = TeamFactory(name="vision")
    team.members.add(user)
    TeamVolume.objects.create(team=team, claim="ckpt", read_only=False)
    env = "1BAD=x\nNOEQUALS\nMASTER_PORT=1"
    form = submit_form(team="vision", env=env, volumes="data\nckpt:/ckpt\n:/x", nodes="0", gpus_per_node="99")
    errors = session_for(user).post("/jobs/new/", form).context["form"].errors
    assert errors["env"][0] == "Line 2 has no '=': write NAME=value."
    assert any("'1BAD' is not a valid variable name" in e for e in errors["env"])
    # Worded for the page, which has no docs/security.md to open (the API cites it).
    assert "MASTER_PORT cannot be set by a job: these variables are the gang's rendezvous, set by Muster." in errors["env"]
    assert [e[:7] for e in errors["volumes"]] == ["Line 1:", "Line 3:"]
    assert errors["gpus_per_node"] == ["No node has 99 GPUs; the largest node has 8."]
    assert "nodes" in errors
    assert not Job.objects.exists()


def test_gpus_beyond_any_node_are_said_beside_a_bad_image_and_nodes_0(user: Any, sim: Any) -> None:
    """Nodes 0, GPUs 9 and a bad image flagged only Nodes and Image: the GPUs came one submit later."""
    errors = session_for(user).post("/jobs/new/", submit_form(image="Not A Ref", nodes="0", gpus_per_node="9")).context["form"].errors
    assert set(errors) == {"image", "nodes", "gpus_per_node"}
    assert errors["gpus_per_node"] == ["No node has 9 GPUs; the largest node has 8."]
    assert not Job.objects.exists()


def test_the_estimate_answers_json_and_writes_nothing(user: Any, sim: Any) -> None:
    client = session_for(user)
    body = client.post("/jobs/new/estimate/", submit_form()).json()
    assert (body["accepted"], body["fits_limits"], body["start"], body["errors"]) == (True, True, "now", 0)
    assert 'data-kind="now"' in body["html"] and "Would start now: the next" in body["html"]
    elastic = client.post("/jobs/new/estimate/", submit_form(nodes="8", min_nodes="2")).json()
    assert "Would start now on 8 of 2\u20138 nodes: the next scheduling cycle places it." in elastic["html"]
    body = client.post("/jobs/new/estimate/", submit_form(nodes="17", image="x y")).json()
    assert (body["accepted"], body["errors"]) == (False, 2)
    assert "the whole cluster has 16 such nodes" in body["html"]
    # Listed in the form's order (Image above Command, Nodes below both), not as found: the form's own, then the API's.
    body = client.post("/jobs/new/estimate/", submit_form(image="x y", command="", nodes="0")).json()
    labels = re.findall(r"<strong>([^<]+):</strong>", body["html"])
    assert labels == ["Image", "Command", "Nodes"]
    assert not (Job.objects.exists() or JobEvent.objects.exists() or UsageCharge.objects.exists() or AuditEntry.objects.exists())
    assert Client().post("/jobs/new/estimate/", submit_form()).status_code == 401


def test_a_signed_out_submit_is_kept_for_after_the_sign_in_and_never_sent(user: Any, sim: Any) -> None:
    client = Client()
    response = client.post("/jobs/new/", submit_form(name="kept", notify_on="fail"))
    assert response.status_code == 302 and response["Location"] == "/accounts/login/?next=/jobs/new/"
    assert not Job.objects.exists()
    client.post("/accounts/login/?next=/jobs/new/", {"username": user.username, "password": PASSWORD})
    page = client.get("/jobs/new/")
    assert page.context["restored"] is True
    filled = page.context["form"]
    assert (filled["name"].value(), filled["command"].value(), filled["nodes"].value()) == ("kept", "python train.py", "2")
    assert filled["notify_on"].value() == ["fail"]
    assert not Job.objects.exists()
    assert "restored" not in client.get("/jobs/new/").context  # kept once


def test_a_gpu_share_asked_on_the_form_is_of_one_gpu_unless_gpus_per_node_was_changed(user: Any, settings: Any, db: None) -> None:
    make_sim(settings, shared="time-slicing:4:1")
    client = session_for(user)
    # "GPUs per node" left at its default (8): the share is of one GPU, as the CLI takes it.
    page = client.post("/jobs/new/", submit_form(nodes="1", gpu_fraction="0.25"))
    assert page.status_code == 302, page.context["form"].errors
    job = Job.objects.get()
    assert (job.gpus_per_node, job.gpu_fraction) == (1, 0.25)
    # Changed to something else, it is the user's word: the API's refusal stands.
    page = client.post("/jobs/new/", submit_form(nodes="1", gpus_per_node="4", gpu_fraction="0.25"))
    assert page.status_code == 200 and "GPU slice is a share of one GPU" in str(page.context["form"].errors["gpus_per_node"])
    assert Job.objects.count() == 1


def test_a_member_of_several_teams_must_choose_one_on_the_form_and_is_told_so_in_its_words(user: Any, sim: Any) -> None:
    for name in ("vision", "speech"):
        TeamFactory(name=name).members.add(user)
    client = session_for(user)
    page = client.get("/jobs/new/").content.decode()
    assert "(none)" not in page and '<option value="" selected>Choose a team</option>' in page
    assert '<select name="team" required' in page
    response = client.post("/jobs/new/", submit_form())
    assert response.status_code == 200 and not Job.objects.exists()
    errors = response.context["form"].errors["team"]
    assert errors == ["You are in teams speech, vision: choose the one this job is for, so its quota and budget apply."]
    assert "muster submit --team" not in response.content.decode()
    client.post("/jobs/new/", submit_form(team="speech"))
    assert Job.objects.get().team.name == "speech"


def test_a_member_of_one_team_gets_it_chosen(user: Any, sim: Any) -> None:
    """It offered "(none)" too, and then charged the job to the team without a word."""
    TeamFactory(name="vision").members.add(user)
    client = session_for(user)
    page = client.get("/jobs/new/").content.decode()
    assert '<option value="vision" selected>vision</option>' in page
    assert "(none)" not in page and "vision, your only team (a member of one team submits for it)" in page
    # A form posted without it (an old page, a clone of a job of no team) is still the team's job, as the API has it.
    assert client.post("/jobs/new/", submit_form(team="")).status_code == 302
    assert Job.objects.get().team.name == "vision"


def test_an_array_submit_makes_one_job_per_index_with_its_dependencies_all_or_none(user: Any, sim: Any) -> None:
    client = session_for(user)
    first = JobFactory(owner=user, name="prep")
    response = client.post("/jobs/new/", submit_form(name="sweep", nodes="1", array="1,3,5-6", dependencies=f"afterok:{first.pk}"))
    elements = list(Job.objects.filter(name="sweep").order_by("array_index"))
    assert [e.array_index for e in elements] == [1, 3, 5, 6]
    array_id = elements[0].pk
    assert response.status_code == 302 and response["Location"] == f"/?array={array_id}"
    assert all(e.array_id == array_id and list(e.dependencies.values_list("on_id", flat=True)) == [first.pk] for e in elements)
    # The estimate is its first element's, and counts the elements.
    estimate = client.post("/jobs/new/estimate/", submit_form(nodes="1", array="0-9")).json()
    assert estimate["accepted"] is True and "of 10" in estimate["html"]


def test_an_array_the_form_cannot_read_or_too_large_is_said_on_its_field_and_nothing_is_queued(user: Any, sim: Any, settings: Any) -> None:
    settings.MUSTER_MAX_ARRAY_SIZE = 10
    for text, said in (
        ("7-2", "'7-2' ends before it starts."),
        ("0-10", "An array has at most 10 elements (MUSTER_MAX_ARRAY_SIZE); '0-10' has more."),
        ("0-9%2", "A limit on running elements (`%N`) is not supported; the queue and quotas decide how many run at once."),
        ("a-b", "'a-b' is not an index or a range; write 7, 0-99 or 0-98:2."),
    ):
        page = session_for(user).post("/jobs/new/", submit_form(array=text))
        assert page.status_code == 200 and page.context["form"].errors["array"] == [said], text
        assert f'value="{text}"' in page.content.decode()  # kept as typed
    assert not Job.objects.exists()
