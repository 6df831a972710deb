"""A job spec from a YAML file and command-line flags, and Slurm's ways of writing a wall time."""

from __future__ import annotations

import re
import shlex
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

# Slurm's --time forms: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S.
_SLURM_TIME = re.compile(r"(?:(?P<days>\d+)-)?(?P<rest>\d+(?::\d+){0,2})")
# Units, as people write them: 4h, 90m, 1h30m, 2d, 45s.
_UNITS = re.compile(r"(?:(?P<d>\d+)d)?(?:(?P<h>\d+)h)?(?:(?P<m>\d+)m)?(?:(?P<s>\d+)s)?")
WALL_TIME_FORMS = "4h, 90m, 1h30m, 2d, 90 (minutes, as Slurm), 1:30:00, 2-00:00:00"


class SpecError(ValueError):
    """A job spec the CLI cannot make sense of (before any server sees it)."""


class _SpecLoader(yaml.SafeLoader):
    """YAML's safe loader, but a key given twice is a mistake to show, not a value to drop (YAML keeps the last)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, value_node in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(None, None, f"'{key}' is given twice", key_node.start_mark)
            seen.add(key)
            if (
                key == "job"
                and isinstance(value_node, yaml.ScalarNode)
                and value_node.style is None
                and _ELEMENT.fullmatch(value_node.value)
            ):
                # A dependency's `job: 12_1` (Slurm's array element) is text: YAML 1.1 reads 12_1 as the number 121.
                value_node.tag = "tag:yaml.org,2002:str"
        return super().construct_mapping(node, deep=deep)


# An array's element as Slurm writes it: 12_1 (array 12, index 1).
_ELEMENT = re.compile(r"[0-9]+_[0-9]+")


def parse_wall_time(text: str) -> int:
    """Seconds in a wall time written as Slurm's `--time` takes it, or with units: `4h`, `90m`, `1:30:00`, `2-00:00:00`.

    A bare number is minutes, as in Slurm.
    """
    value = text.strip().lower()
    seconds = _slurm_seconds(value) if not value or value[-1].isdigit() else _unit_seconds(value)
    if seconds is None:
        raise SpecError(f"'{text}' is not a wall time; write it as {WALL_TIME_FORMS}.")
    if seconds <= 0:
        raise SpecError(f"A wall time must be longer than zero; got '{text}'.")
    return seconds


def _slurm_seconds(value: str) -> int | None:
    match = _SLURM_TIME.fullmatch(value)
    if match is None:
        return None
    parts = [int(p) for p in match["rest"].split(":")]
    if match["days"] is not None:
        # After a day count, the fields are hours[:minutes[:seconds]].
        hours, minutes, seconds = [*parts, 0, 0][:3]
        return ((int(match["days"]) * 24 + hours) * 60 + minutes) * 60 + seconds
    if len(parts) == 1:
        return parts[0] * 60
    if len(parts) == 2:
        return parts[0] * 60 + parts[1]
    return (parts[0] * 60 + parts[1]) * 60 + parts[2]


def _unit_seconds(value: str) -> int | None:
    match = _UNITS.fullmatch(value.replace(" ", ""))
    if match is None or not any(match.groupdict().values()):
        return None
    d, h, m, s = (int(match[k] or 0) for k in "dhms")
    return ((d * 24 + h) * 60 + m) * 60 + s


def format_duration(seconds: float | None) -> str:
    """`1h30m`, `2d4h`, `2m5s`, `45s`: the shortest way to read a span."""
    if seconds is None:
        return "-"
    total = max(0, round(seconds))
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    # Seconds matter under an hour (a short run, a close ETA), not beyond.
    parts = [(days, "d"), (hours, "h"), (minutes, "m")] + ([(secs, "s")] if total < 3600 else [])
    text = "".join(f"{n}{unit}" for n, unit in parts if n)
    return text or "0s"


def parse_node_count(text: str) -> tuple[int, int | None]:
    """Nodes as sbatch -N takes them, in -N and in a job file's `nodes:`: 4, or 2-8 for an elastic job (min-max, the
    max None for a fixed size); 4-4 is 4, as in sbatch. Raises SpecError."""
    low, sep, high = text.strip().partition("-")
    try:
        first, last = int(low), int(high) if sep else None
    except ValueError:
        raise SpecError(f"'{text}' is not a node count: write 4, or 2-8 for an elastic job") from None
    if first < 1:
        raise SpecError(f"'{text}': a job runs on at least 1 node")
    if last is not None and last < first:
        raise SpecError(f"'{text}': an elastic range goes from its fewest nodes to its most (e.g. 2-8)")
    return first, None if last == first else last


def load_spec_file(path: str) -> dict[str, Any]:
    """A job spec in YAML whose keys are the API's fields (`name`, `image`, `command`, `nodes`, ...); `-` reads stdin, as
    sbatch reads its script there (`generate-spec | muster submit -`)."""
    label = "stdin" if path == "-" else path
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text()
    except OSError as exc:
        raise SpecError(f"cannot read {label}: {exc.strerror or exc}") from exc
    try:
        data = yaml.load(text, Loader=_SpecLoader)  # a SafeLoader
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        line = f" (line {where.line + 1})" if where is not None else ""
        raise SpecError(f"{label} is not valid YAML{line}: {getattr(exc, 'problem', None) or exc}") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        if any(line.lstrip().startswith("#SBATCH") for line in text.splitlines()):
            # `muster --help` says "like sbatch job.sh": a Slurm user tries their script first.
            raise SpecError(
                f"{label} is a batch script: muster takes no #SBATCH directives. Give them as flags (-N 2 -G 8 -t 4h "
                "--image IMAGE -- COMMAND) or in a YAML file of the job's fields (muster submit --help shows one)."
            )
        raise SpecError(f"{label} must be a mapping of the job's fields (name: ..., image: ..., nodes: ...).")
    return {str(key): value for key, value in data.items()}


DEPENDENCY_TYPES = ("afterok", "afterany", "afternotok")
_NAMED = re.compile(r"(?P<job>[0-9]+)(?:_(?P<index>[0-9]+))?")


def parse_dependency(text: str) -> list[dict[str, object]]:
    """sbatch's --dependency text (`afterok:12:13,afterany:14_2`) as the API's `dependencies` list, in the words the
    submit form says it with (jobs.dependencies.dependencies_parse: the client may not import the server). An id is a
    job's or an array's, or an array's element as Slurm writes it (`14_2`: array 14, index 2; `{"job": 14, "index": 2}`).
    Slurm's `?` (any one of them), `after`, `aftercorr` and `singleton` are refused, naming what Muster takes.
    SpecError with every mistake at once."""
    if "?" in text:
        raise SpecError("Muster waits for every job named (separate them with ','), not for any one of them ('?').")
    found: list[dict[str, object]] = []
    problems: list[str] = []
    for part in (p.strip() for p in text.split(",")):
        kind, _, ids = part.partition(":")
        named = [_NAMED.fullmatch(w) for w in ids.split(":")] if ids else []
        if not part:
            problems.append("An empty entry (a comma too many): write TYPE:ID[:ID...], e.g. afterok:12,afterany:14.")
        elif kind not in DEPENDENCY_TYPES:
            problems.append(
                f"'{part}': the types are {', '.join(DEPENDENCY_TYPES)}, as TYPE:ID[:ID...] (e.g. afterok:12); Slurm's after, "
                "aftercorr and singleton are not supported."
            )
        elif not named or not all(named):
            problems.append(f"'{part}': give job ids after the type, as {kind}:12, {kind}:12:13 or {kind}:12_1 (an array's element).")
        elif any(int(m["job"]) == 0 for m in named if m):
            problems.append(f"'{part}': job ids start at 1.")
        else:
            for m in named:
                if m:
                    index = {"index": int(m["index"])} if m["index"] is not None else {}
                    found.append({"type": kind, "job": int(m["job"]), **index})
    if problems:
        raise SpecError(" ".join(problems))
    return found


def build_spec(base: Mapping[str, Any], overrides: Mapping[str, Any], *, fallback_name: str | None = None) -> dict[str, Any]:
    """The file's fields with the flags' on top (a flag left unset keeps the file's value).

    Conveniences over the API's own shape: `command` may be one string (split as a shell would),
    `wall_time_seconds` may be written as a wall time (`4h`), env values may be numbers, and the name defaults
    to `fallback_name`; `nodes` defaults to 1, as in Slurm, and may be an elastic range (`2-8`) as -N takes it.
    """
    spec = dict(base)
    spec.update({key: value for key, value in overrides.items() if value is not None and key != "env"})
    if overrides.get("env"):
        # --env adds to the file's environment (and wins over the same name there).
        spec["env"] = {**(spec.get("env") or {}), **overrides["env"]}
    if isinstance(spec.get("command"), str):
        try:
            spec["command"] = shlex.split(spec["command"])
        except ValueError as exc:  # an unclosed quote, or a lone backslash at the end
            raise SpecError(f"command: cannot split it as a shell would: {exc}.") from None
    if isinstance(spec.get("wall_time_seconds"), str):
        spec["wall_time_seconds"] = parse_wall_time(spec["wall_time_seconds"])
    if isinstance(spec.get("dependencies"), str):
        # Written as -d writes it: `dependencies: afterok:12,afterany:14`.
        spec["dependencies"] = parse_dependency(spec["dependencies"])
    if isinstance(spec.get("env"), list):
        # Written as a list of KEY=VALUE, as docker-compose takes it.
        spec["env"] = parse_env([str(item) for item in spec["env"]], what="env")
    if "env" in spec and isinstance(spec["env"], dict):
        # YAML reads `SEED: 1` as a number; the API takes strings.
        spec["env"] = {str(key): _env_value(str(key), value) for key, value in spec["env"].items()}
    if not spec.get("name") and fallback_name:
        spec["name"] = fallback_name
    if isinstance(spec.get("nodes"), str):
        _node_range(spec, base, overrides)
    if spec.get("max_nodes") and spec.get("min_nodes") == spec["max_nodes"] and spec.get("nodes") in (None, spec["max_nodes"]):
        # min_nodes: 4 and max_nodes: 4 is 4 nodes, as -N 4-4 and `nodes: 4-4` are (the server takes it so too).
        spec["nodes"] = spec.pop("max_nodes")
        spec.pop("min_nodes")
    if spec.get("max_nodes"):
        spec.pop("nodes", None)  # an elastic job's nodes is its max_nodes
    else:
        spec.setdefault("nodes", 1)
    if shares_gpu(spec):
        spec.setdefault("gpus_per_node", 1)  # a GPU slice is a share of one GPU
    return spec


def _node_range(spec: dict[str, Any], base: Mapping[str, Any], overrides: Mapping[str, Any]) -> None:
    """`nodes: 2-8` in a job file, as -N 2-8 takes it: min_nodes 2 and max_nodes 8 (`nodes: 4` is 4). A range given by
    -N wins over the file's; one given twice in the file is refused."""
    text = spec.pop("nodes")
    try:
        first, last = parse_node_count(text)
    except SpecError as exc:
        raise SpecError(f"nodes: {exc}") from None
    if last is None:
        spec["nodes"] = first
    elif overrides.get("max_nodes") is None:
        if base.get("min_nodes") is not None or base.get("max_nodes") is not None:
            raise SpecError(f"nodes: {text} and min_nodes/max_nodes both give the elastic range: write one of them.")
        spec["min_nodes"], spec["max_nodes"] = first, last


def shares_gpu(job: Mapping[str, Any]) -> bool:
    """A GPU slice: a share of one GPU, asked by its fraction, its memory or isolation (the API's fields)."""
    return bool(job.get("gpu_fraction") or job.get("gpu_memory_gb") or job.get("gpu_isolation"))


def _env_value(key: str, value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, dict)):
        raise SpecError(f"env: {key} is a {type(value).__name__}; a variable's value is a string or a number (quote it).")
    return "" if value is None else str(value)


def name_for(spec_file: str | None, command: list[str] | str | None) -> str | None:
    """Slurm names a job after its script: the YAML file's stem, else the command's program."""
    if spec_file and spec_file != "-":  # stdin has no name: the command's program names the job
        return Path(spec_file).stem[:100]
    if isinstance(command, str):  # a job file's command as one string: its program is its first word
        command = command.split()
    if command:
        return Path(command[0]).name[:100] or None
    return None


def parse_env(pairs: list[str], *, what: str = "--env") -> dict[str, str]:
    """`--env KEY=VALUE` flags (or a job.yaml's env written as a list) as a mapping."""
    env: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SpecError(f"{what} takes KEY=VALUE; got '{pair}'.")
        env[key] = value
    return env
