"""The pure parts of the CLI: wall times as Slurm writes them, a YAML file with flags on top, `--since`."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from muster_client.commands import parse_since
from muster_client.spec import SpecError, build_spec, format_duration, load_spec_file, name_for, parse_env, parse_wall_time


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("4h", 4 * 3600),
        ("90m", 90 * 60),
        ("1h30m", 90 * 60),
        ("2d", 2 * 86400),
        ("45s", 45),
        ("90", 90 * 60),  # a bare number is minutes, as in Slurm
        ("30:15", 30 * 60 + 15),  # minutes:seconds
        ("1:30:00", 90 * 60),
        ("2-00:00:00", 2 * 86400),
        ("1-12", 36 * 3600),  # days-hours
        ("1-02:30", 26 * 3600 + 30 * 60),  # days-hours:minutes
        (" 4H ", 4 * 3600),
    ],
)
def test_wall_times_are_read_as_slurm_and_people_write_them(text: str, seconds: int) -> None:
    assert parse_wall_time(text) == seconds


@pytest.mark.parametrize("text", ["", "4x", "h", "1:2:3:4", "-5", "1.5h", "four hours"])
def test_a_wall_time_that_is_not_one_says_which_forms_work(text: str) -> None:
    with pytest.raises(SpecError, match=r"not a wall time; write it as 4h, 90m"):
        parse_wall_time(text)


@pytest.mark.parametrize("text", ["0", "0h", "0:00:00"])
def test_a_zero_wall_time_is_refused(text: str) -> None:
    with pytest.raises(SpecError, match="longer than zero"):
        parse_wall_time(text)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(45, "45s"), (125, "2m5s"), (120, "2m"), (90 * 60, "1h30m"), (3601, "1h"), (2 * 86400 + 3600, "2d1h"), (0, "0s"), (None, "-")],
)
def test_durations_read_short(seconds: float | None, text: str) -> None:
    assert format_duration(seconds) == text


def write(tmp_path: Path, text: str, name: str = "train.yaml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_flags_override_the_files_fields_and_unset_flags_keep_them(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "name: llama\nimage: pytorch:24.05\ncommand: torchrun --nproc-per-node 8 'train.py' --lr 3e-4\n"
        "nodes: 2\ngpus_per_node: 8\nwall_time_seconds: 4h\nenv: {SEED: 1, WANDB: 'on', DEBUG: true}\n",
    )
    spec = build_spec(load_spec_file(path), {"nodes": 4, "gpus_per_node": None, "env": {"EXTRA": "x", "SEED": "2"}})
    assert spec == {
        "name": "llama",
        "image": "pytorch:24.05",
        "command": ["torchrun", "--nproc-per-node", "8", "train.py", "--lr", "3e-4"],
        "nodes": 4,
        "gpus_per_node": 8,
        "wall_time_seconds": 4 * 3600,
        "env": {"SEED": "2", "WANDB": "on", "DEBUG": "true", "EXTRA": "x"},
    }


def test_flags_alone_make_a_spec_named_after_the_command_on_one_node() -> None:
    command = ["/opt/bin/torchrun", "train.py"]
    spec = build_spec({}, {"image": "img", "command": command, "gpus_per_node": 8}, fallback_name=name_for(None, command))
    assert spec == {"image": "img", "command": command, "gpus_per_node": 8, "nodes": 1, "name": "torchrun"}


def test_a_spec_file_names_the_job_after_itself_unless_it_has_a_name(tmp_path: Path) -> None:
    path = write(tmp_path, "image: img\n", name="sweep-lr.yaml")
    assert build_spec(load_spec_file(path), {}, fallback_name=name_for(path, None))["name"] == "sweep-lr"
    assert build_spec({"name": "mine"}, {}, fallback_name="sweep-lr")["name"] == "mine"


def test_nodes_in_a_file_takes_an_elastic_range_as_dash_n_does(tmp_path: Path) -> None:
    """`nodes: 2-8` was sent as it was, and the server said only "nodes: A valid integer is required."."""
    path = write(tmp_path, "image: img\ncommand: python train.py\nnodes: 2-8\n")
    spec = build_spec(load_spec_file(path), {})
    assert (spec["min_nodes"], spec["max_nodes"], "nodes" in spec) == (2, 8, False)
    assert build_spec({"nodes": "4-4"}, {})["nodes"] == 4 and build_spec({"nodes": "3"}, {})["nodes"] == 3
    # min_nodes: 4 with max_nodes: 4 alike: a plain job of 4 nodes, as -N 4-4.
    equal = build_spec({"min_nodes": 4, "max_nodes": 4}, {})
    assert (equal["nodes"], "min_nodes" in equal, "max_nodes" in equal) == (4, False, False)
    # -N wins over the file's range, as any flag over the file.
    assert build_spec({"nodes": "2-8"}, {"nodes": 4})["nodes"] == 4
    flags = build_spec({"nodes": "2-8"}, {"min_nodes": 3, "max_nodes": 6})
    assert (flags["min_nodes"], flags["max_nodes"], "nodes" in flags) == (3, 6, False)
    with pytest.raises(SpecError, match=r"^nodes: '2-x' is not a node count: write 4, or 2-8 for an elastic job$"):
        build_spec({"nodes": "2-x"}, {})
    with pytest.raises(SpecError, match=r"^nodes: '8-2': an elastic range goes from its fewest nodes to its most"):
        build_spec({"nodes": "8-2"}, {})
    with pytest.raises(SpecError, match=r"^nodes: 2-8 and min_nodes/max_nodes both give the elastic range: write one of them\.$"):
        build_spec({"nodes": "2-8", "max_nodes": 6}, {})


def test_a_yaml_file_that_is_not_a_mapping_or_not_yaml_is_refused_with_where(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="must be a mapping"):
        load_spec_file(write(tmp_path, "- just\n- a list\n"))
    with pytest.raises(SpecError, match=r"not valid YAML \(line 2\)"):
        load_spec_file(write(tmp_path, "name: a\n  image: [b\n"))
    with pytest.raises(SpecError, match="cannot read"):
        load_spec_file(str(tmp_path / "missing.yaml"))


def test_a_field_given_twice_is_refused_with_its_line(tmp_path: Path) -> None:
    # YAML itself keeps the last: the first image would be dropped without a word.
    with pytest.raises(SpecError, match=r"not valid YAML \(line 3\): 'image' is given twice$"):
        load_spec_file(write(tmp_path, "image: busybox\nnodes: 2\nimage: pytorch\n"))
    assert load_spec_file(write(tmp_path, "env: {A: 1}\nimage: busybox\n")) == {"env": {"A": 1}, "image": "busybox"}


def test_env_in_a_file_is_a_mapping_or_a_list_of_pairs_and_a_value_is_never_a_list() -> None:
    base = {"image": "busybox", "command": ["true"]}
    assert build_spec({**base, "env": ["A=1", "B=x"]}, {})["env"] == {"A": "1", "B": "x"}
    assert build_spec({**base, "env": {"SEED": 1, "DEBUG": True}}, {})["env"] == {"SEED": "1", "DEBUG": "true"}
    with pytest.raises(SpecError, match="env: GPUS is a list; a variable's value is a string or a number"):
        build_spec({**base, "env": {"GPUS": [0, 1]}}, {})
    with pytest.raises(SpecError, match="env takes KEY=VALUE; got 'A'"):
        build_spec({**base, "env": ["A"]}, {})


def test_env_flags_are_key_value_pairs() -> None:
    assert parse_env(["A=1", "B=x=y", "C="]) == {"A": "1", "B": "x=y", "C": ""}
    with pytest.raises(SpecError, match="KEY=VALUE"):
        parse_env(["NOVALUE"])


def test_since_takes_a_span_ago_or_a_date() -> None:
    now = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
    assert parse_since("2h", now=now) == "2026-11-25T10:00:00+00:00"
    assert parse_since("3d", now=now) == "2026-11-22T12:00:00+00:00"
    assert parse_since("2026-11-01T09:00+01:00", now=now) == "2026-11-01T09:00:00+01:00"
    assert parse_since("2026-11-01T09:00Z", now=now) == "2026-11-01T09:00:00+00:00"
    assert datetime.fromisoformat(parse_since("2026-11-01", now=now)).tzinfo is not None  # local midnight, with its offset
    with pytest.raises(SpecError, match="neither a date"):
        parse_since("yesterday", now=now)
    with pytest.raises(SpecError, match="neither a date"):
        parse_since("20261", now=now)
