"""`muster submit --dependency` (sbatch's): parsed as Slurm writes it, shown by `muster show`, refused where Muster
does not take Slurm's form."""

from __future__ import annotations

import re
from typing import Any

import pytest

from jobs.models import Job, JobDependency
from tests.client.cli_run import run, run_live
from tests.conftest import SimHarness

IMAGE = "nvcr.io/nvidia/pytorch:24.05-py3"


def submit(capsys: pytest.CaptureFixture[str], *more: str) -> int:
    code, out, err = run_live(capsys, "submit", "-G", "8", "-t", "1h", "--image", IMAGE, *more, "--", "python", "t.py")
    assert code == 0, err
    return int(re.search(r"(\d+)", out).group(1))  # type: ignore[union-attr]


def test_submit_dependency_as_sbatch_writes_it_and_show_says_where_each_stands(
    signed_in: Any, tx_sim: SimHarness, capsys: pytest.CaptureFixture[str]
) -> None:
    first, second = submit(capsys, "-J", "prep"), submit(capsys, "-J", "eval")
    job = submit(capsys, "-J", "train", "-d", f"afterok:{first}:{second},afterany:{first}")
    # afterok and afterany on one job: the strictest is kept.
    assert sorted(JobDependency.objects.filter(job_id=job).values_list("on_id", "kind")) == [(first, "afterok"), (second, "afterok")]
    tx_sim.cycle()
    code, out, _ = run_live(capsys, "show", str(job))
    assert code == 0
    assert f"dependencies    afterok:{first} (SCHEDULED), afterok:{second} (SCHEDULED)\n" in out
    assert f"reason          Waits for job {first} to succeed (afterok; it is PENDING) and job {second} to succeed" in out
    assert Job.objects.get(pk=job).pending_reason_code == "DEPENDENCY"


def test_a_yaml_spec_takes_dependencies_as_d_writes_them(
    signed_in: Any, tx_sim: SimHarness, capsys: pytest.CaptureFixture[str], tmp_path: Any
) -> None:
    first = submit(capsys, "-J", "prep")
    spec = tmp_path / "job.yaml"
    spec.write_text(
        f"name: train\nimage: {IMAGE}\ncommand: python t.py\ngpus_per_node: 8\nwall_time_seconds: 1h\ndependencies: afterany:{first}\n"
    )
    code, out, err = run_live(capsys, "submit", str(spec))
    assert code == 0, err
    job = int(re.search(r"(\d+)", out).group(1))  # type: ignore[union-attr]
    assert list(JobDependency.objects.filter(job_id=job).values_list("on_id", "kind")) == [(first, "afterany")]


@pytest.mark.parametrize(
    ("flag", "said"),
    [
        ("after:5", "'after:5': the types are afterok, afterany, afternotok, as TYPE:ID[:ID...] (e.g. afterok:12); Slurm's after"),
        ("afterok:5?afterany:6", "Muster waits for every job named (separate them with ','), not for any one of them ('?')"),
        ("afterok", "'afterok': give job ids after the type, as afterok:12, afterok:12:13 or afterok:12_1 (an array's element)"),
        ("singleton", "'singleton': the types are"),
        ("afterok:0", "'afterok:0': job ids start at 1."),
        ("afterok:1,", "An empty entry (a comma too many)"),
    ],
)
def test_dependencies_muster_does_not_take_are_refused_before_anything_is_sent(
    signed_in: Any, capsys: pytest.CaptureFixture[str], flag: str, said: str
) -> None:
    code, _, err = run(capsys, "submit", "-G", "8", "-t", "1h", "--image", IMAGE, "-d", flag, "--", "python", "t.py")
    assert code == 2 and said in err
    assert not Job.objects.exists()


def test_an_arrays_element_as_d_and_yaml_write_it_and_show_names_the_array_compactly(
    signed_in: Any, tx_sim: SimHarness, capsys: pytest.CaptureFixture[str], tmp_path: Any
) -> None:
    array_id = submit(capsys, "-J", "sweep", "--array", "0-5")
    elements = dict(Job.objects.filter(array_id=array_id).values_list("array_index", "pk"))
    job = submit(capsys, "-J", "train", "-d", f"afterok:{array_id}")
    code, out, _ = run_live(capsys, "show", str(job))
    assert code == 0
    # Six elements read as Slurm names them, with where they stand: not six entries.
    assert f"dependencies    afterok:{array_id}_[0-5] (6 PENDING)\n" in out
    one = submit(capsys, "-J", "eval", "-d", f"afternotok:{array_id}_4")
    assert list(JobDependency.objects.filter(job_id=one).values_list("on_id", "kind")) == [(elements[4], "afternotok")]
    code, out, _ = run_live(capsys, "show", str(one))
    assert f"dependencies    afternotok:{array_id}_4 (PENDING)\n" in out
    # In a YAML spec's list, `job: 12_1` is the element (YAML alone would read it as the number 121).
    spec = tmp_path / "job.yaml"
    spec.write_text(
        f"name: test\nimage: {IMAGE}\ncommand: python t.py\ngpus_per_node: 8\nwall_time_seconds: 1h\n"
        f"dependencies:\n  - type: afterany\n    job: {array_id}_5\n"
    )
    code, out, err = run_live(capsys, "submit", str(spec))
    assert code == 0, err
    yaml_job = int(re.search(r"(\d+)", out).group(1))  # type: ignore[union-attr]
    assert list(JobDependency.objects.filter(job_id=yaml_job).values_list("on_id", "kind")) == [(elements[5], "afterany")]
    # An index the array has not: said in the server's words, nothing queued.
    code, _, err = run(capsys, "submit", "-G", "8", "-t", "1h", "--image", IMAGE, "-d", f"afterok:{array_id}_9", "--", "python", "t.py")
    assert code != 0 and f"Array {array_id} has no element 9 (its elements: {array_id}_[0-5])." in err
