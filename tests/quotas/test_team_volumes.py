"""A team's data: admins give a team PersistentVolumeClaims (and image-pull secrets); its jobs mount them where they say."""

from __future__ import annotations

from typing import Any

import pytest

from jobs.cluster.base import GangSpec
from jobs.cluster.manifests import PodOptions, pod_manifest
from jobs.models import Job
from quotas.models import Team, TeamVolume
from scheduler.cycle import _gang_spec
from tests.conftest import job_payload

JOBS = "/api/v1/jobs/"


@pytest.fixture
def team(user: Any) -> Team:
    team = Team.objects.create(name="vision", image_pull_secrets="regcred, mirror-cred")
    team.members.add(user)
    TeamVolume.objects.create(team=team, claim="imagenet", read_only=True)
    TeamVolume.objects.create(team=team, claim="vision-scratch", read_only=False)
    Team.objects.create(name="nlp").volumes.create(claim="nlp-corpus")
    return team


def submit(api: Any, **overrides: Any) -> Any:
    return api.post(JOBS, job_payload(team="vision", **overrides), format="json")


def test_a_job_mounts_its_teams_volumes_where_it_says(api: Any, team: Team, sim: Any) -> None:
    volumes = [{"claim": "imagenet", "mount_path": "/data/imagenet/"}, {"claim": "vision-scratch", "mount_path": "/scratch"}]
    response = submit(api, volumes=volumes)
    assert response.status_code == 201, response.content
    assert response.json()["volumes"] == [
        {"claim": "imagenet", "mount_path": "/data/imagenet", "read_only": False},
        {"claim": "vision-scratch", "mount_path": "/scratch", "read_only": False},
    ]
    sim.cycle()  # the launch reads the team's volumes as they are now: imagenet is read-only whatever the job asked
    spec = _gang_spec(Job.objects.get(pk=response.json()["id"]), ("sim-node-000",))
    assert spec.volumes == (("imagenet", "/data/imagenet", True), ("vision-scratch", "/scratch", False))
    assert spec.image_pull_secrets == ("regcred", "mirror-cred")


@pytest.mark.parametrize(
    ("volumes", "message"),
    [
        ([{"claim": "nlp-corpus", "mount_path": "/data"}], "Team vision has no volume 'nlp-corpus' (it has: imagenet, vision-scratch)."),
        ([{"claim": "imagenet", "mount_path": "data"}], "'data' is not an absolute path"),
        ([{"claim": "imagenet", "mount_path": "/etc/ssl"}], "/etc/ssl is a system directory"),
        ([{"claim": "imagenet", "mount_path": "/data/../etc"}], "may not contain '.' or '..'"),
        ([{"claim": "imagenet", "mount_path": "/data"}, {"claim": "vision-scratch", "mount_path": "/data/x"}], "overlaps another"),
        ([{"claim": "imagenet", "mount_path": "/data", "subPath": "x"}], "subPath"),
    ],
)
def test_a_volume_the_team_lacks_or_a_bad_path_is_a_400_and_nothing_is_created(
    api: Any, team: Team, sim: Any, volumes: list[dict[str, str]], message: str
) -> None:
    response = submit(api, volumes=volumes)
    assert response.status_code == 400 and message in str(response.json()), response.json()
    assert not Job.objects.exists()


def test_a_job_without_a_team_mounts_nothing(api: Any, sim: Any) -> None:
    response = api.post(JOBS, job_payload(volumes=[{"claim": "imagenet", "mount_path": "/data"}]), format="json")
    assert response.status_code == 400 and "give it a team" in str(response.json()["volumes"])


def test_a_volume_taken_from_the_team_after_the_submit_refuses_the_launch(api: Any, team: Team, sim: Any) -> None:
    job_id = submit(api, volumes=[{"claim": "vision-scratch", "mount_path": "/scratch"}]).json()["id"]
    TeamVolume.objects.filter(claim="vision-scratch").delete()
    report = sim.cycle()
    job = Job.objects.get(pk=job_id)
    assert report.launch_failed == [job_id] and job.state == "PENDING"
    assert "no longer has the volume vision-scratch" in job.pending_reason


def test_the_pods_mount_the_claims_and_pull_with_the_teams_secrets() -> None:
    spec = GangSpec(
        job_id=7, attempt=1, name="j", image="busybox:1", command=("true",), env={}, node_names=("n0",), gpus_per_node=8,
        wall_time_seconds=60, owner="u", volumes=(("imagenet", "/data", True),), image_pull_secrets=("regcred",),
    )  # fmt: skip
    pod = pod_manifest(spec, 0, PodOptions(image_pull_secret="site-cred"))["spec"]
    assert {"name": "data-0", "persistentVolumeClaim": {"claimName": "imagenet", "readOnly": True}} in pod["volumes"]
    assert {"name": "data-0", "mountPath": "/data", "readOnly": True} in pod["containers"][0]["volumeMounts"]
    assert pod["imagePullSecrets"] == [{"name": "site-cred"}, {"name": "regcred"}]
    assert not any("hostPath" in v for v in pod["volumes"])
