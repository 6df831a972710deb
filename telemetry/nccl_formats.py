"""Parse what jobs push about their NCCL throughput, validating every field before anything is stored.

Two formats jobs already produce:

- NCCL Inspector's per-collective JSON records, as JSON (one record, a list, or
  `{"records": [...]}`) or JSON lines (the plugin's own dump files). A record is flat
  (`coll`, `coll_msg_size_bytes`, `coll_exec_time_us`, `coll_algobw_gbs`, `coll_busbw_gbs`) or the
  plugin's nesting of those under `coll_perf`, with `header.rank` and
  `metadata.dump_timestamp_us`. Other keys are ignored, so a newer plugin still parses.
- nccl-tests' text output: the column header names the columns, each result row gives one
  sample per group (out-of-place, in-place) from its `time`, `algbw` and `busbw` columns.
  Lines that are neither (NCCL_DEBUG logs) are skipped; a result row that does not parse is an
  error.

Anything wrong is a `PushInvalid` naming where, and the caller stores nothing.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from apikit.json_limits import json_depth_error

MAX_MSG_SIZE_BYTES = 2**50  # 1 PiB
MAX_EXEC_TIME_US = 3_600_000_000.0  # one hour
MAX_BANDWIDTH_GBS = 100_000.0  # far above any link today (NVLink 5 is 1,800 GB/s per GPU)
MAX_RANK = 1_000_000
# How far from the server's clock a record's own timestamp may be.
MAX_PAST = timedelta(days=7)
MAX_FUTURE = timedelta(hours=1)
MAX_ERRORS = 20
COLL_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.\-]{0,63}")
JSON_TYPES = {"application/json"}
JSON_LINES_TYPES = {"application/x-ndjson", "application/jsonl", "application/json-lines", "application/x-jsonlines"}
TEXT_TYPES = {"text/plain"}
FIELDS = ("coll", "coll_msg_size_bytes", "coll_exec_time_us", "coll_algobw_gbs", "coll_busbw_gbs")


@dataclass(frozen=True)
class NcclRecord:
    format: str
    coll: str
    msg_size_bytes: int
    exec_time_us: float
    algbw_gbs: float
    busbw_gbs: float
    rank: int | None = None
    at: datetime | None = None
    in_place: bool | None = None


class PushInvalid(Exception):
    """The push is malformed; `errors` maps where to what is wrong."""

    def __init__(self, errors: dict[str, list[str]]) -> None:
        super().__init__("; ".join(f"{k}: {' '.join(v)}" for k, v in errors.items()))
        self.errors = errors


class UnsupportedFormat(Exception):
    """The content type is none of the accepted ones (415)."""


def parse_push(body: bytes, content_type: str, *, max_records: int, now: datetime, coll: str | None = None) -> list[NcclRecord]:
    """Every record of a push, validated; PushInvalid (nothing valid is returned) on any error."""
    media = content_type.split(";", 1)[0].strip().lower()
    if media not in JSON_TYPES | JSON_LINES_TYPES | TEXT_TYPES:
        raise UnsupportedFormat(
            f"Unsupported content type {media or '(none)'!r}: send NCCL Inspector records as application/json or "
            "application/x-ndjson, or nccl-tests output as text/plain."
        )
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PushInvalid({"body": [f"Not UTF-8 text (byte {exc.start})."]}) from exc
    if media in TEXT_TYPES:
        if coll is not None and not COLL_NAME.fullmatch(coll):
            raise PushInvalid({"coll": ["A collective name is 1-64 letters, digits, '_', '.' or '-', starting with a letter."]})
        return parse_nccl_tests(text, max_records=max_records, now=now, coll=coll)
    if media in JSON_LINES_TYPES:
        items = []
        for number, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                items.append(_json(line, f"line {number}"))
                if len(items) > max_records:
                    break
    else:
        value = _json(text, "body")
        items = _json_items(value)
    if not items:
        raise PushInvalid({"records": ["No records."]})
    if len(items) > max_records:
        raise PushInvalid({"records": [f"At most {max_records} records per push."]})
    records: list[NcclRecord] = []
    errors: dict[str, list[str]] = {}
    for index, item in enumerate(items):
        try:
            records.append(inspector_record(item, now=now))
        except PushInvalid as exc:
            for key, messages in exc.errors.items():
                if len(errors) < MAX_ERRORS:
                    errors[f"records[{index}]{key}"] = messages
    if errors:
        raise PushInvalid(errors)
    return records


def _json(text: str, where: str) -> Any:
    too_deep = json_depth_error(text.encode())
    if too_deep:
        raise PushInvalid({where: [too_deep]})
    try:
        # Refuse NaN/Infinity literals: they are not JSON, and not bandwidths.
        return json.loads(text, parse_constant=_reject_constant)
    except ValueError as exc:
        raise PushInvalid({where: [f"Not valid JSON: {exc}"]}) from exc


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def _json_items(value: Any) -> list[Any]:
    if isinstance(value, list):
        return value
    if isinstance(value, dict) and set(value) == {"records"}:
        if not isinstance(value["records"], list):
            raise PushInvalid({"records": ["Must be a list of records."]})
        return value["records"]
    if isinstance(value, dict):
        return [value]
    raise PushInvalid({"body": ['Send a record, a list of records, or {"records": [...]}.']})


def inspector_record(item: Any, *, now: datetime) -> NcclRecord:
    """One NCCL Inspector record, flat or nested under `coll_perf`."""
    if not isinstance(item, dict):
        raise PushInvalid({"": ["Must be a JSON object."]})
    perf = item.get("coll_perf", item)
    if not isinstance(perf, dict):
        raise PushInvalid({".coll_perf": ["Must be a JSON object."]})
    prefix = ".coll_perf" if "coll_perf" in item else ""
    errors: dict[str, list[str]] = {}
    missing = [f for f in FIELDS if f not in perf]
    for name in missing:
        errors[f"{prefix}.{name}"] = ["Required."]
    values: dict[str, Any] = {}
    if "coll" in perf:
        coll = perf["coll"]
        if not isinstance(coll, str) or not COLL_NAME.fullmatch(coll):
            errors[f"{prefix}.coll"] = ["A collective name: 1-64 letters, digits, '_', '.' or '-', starting with a letter."]
        values["coll"] = coll
    for name, low, high, integral in (
        ("coll_msg_size_bytes", 0, MAX_MSG_SIZE_BYTES, True),
        ("coll_exec_time_us", 0, MAX_EXEC_TIME_US, False),
        ("coll_algobw_gbs", 0, MAX_BANDWIDTH_GBS, False),
        ("coll_busbw_gbs", 0, MAX_BANDWIDTH_GBS, False),
    ):
        if name in perf:
            number, error = _number(perf[name], low, high, integral)
            if error:
                errors[f"{prefix}.{name}"] = [error]
            values[name] = number
    rank = at = None
    header = item.get("header")
    if header is not None:
        if not isinstance(header, dict):
            errors[".header"] = ["Must be a JSON object."]
        elif "rank" in header:
            rank, error = _number(header["rank"], 0, MAX_RANK, True)
            if error:
                errors[".header.rank"] = [error]
    metadata = item.get("metadata")
    if metadata is not None:
        if not isinstance(metadata, dict):
            errors[".metadata"] = ["Must be a JSON object."]
        elif "dump_timestamp_us" in metadata:
            at, error = _timestamp(metadata["dump_timestamp_us"], now)
            if error:
                errors[".metadata.dump_timestamp_us"] = [error]
    if errors:
        raise PushInvalid(errors)
    return NcclRecord(
        format="inspector",
        coll=values["coll"],
        msg_size_bytes=int(values["coll_msg_size_bytes"]),
        exec_time_us=float(values["coll_exec_time_us"]),
        algbw_gbs=float(values["coll_algobw_gbs"]),
        busbw_gbs=float(values["coll_busbw_gbs"]),
        rank=None if rank is None else int(rank),
        at=at,
    )


def _number(value: Any, low: float, high: float, integral: bool) -> tuple[float | None, str]:
    """(value, "") when it is a number in range, else (None, why not)."""
    # bool is an int in Python; `true` is not a byte count.
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None, "Must be a number."
    if not math.isfinite(value):
        return None, "Must be a finite number."
    if integral and not float(value).is_integer():
        return None, "Must be a whole number."
    if not low <= value <= high:
        return None, f"Must be between {low:g} and {high:g}."
    return value, ""


def _timestamp(value: Any, now: datetime) -> tuple[datetime | None, str]:
    micros, error = _number(value, 0, 2**62, True)
    if micros is None:
        return None, error
    at = datetime.fromtimestamp(int(micros) / 1e6, tz=UTC)
    if not now - MAX_PAST <= at <= now + MAX_FUTURE:
        return None, "Microseconds since the epoch, within the last 7 days (and no more than 1 hour ahead of the server)."
    return at, ""


# --- nccl-tests ------------------------------------------------------------------------------------

_STARTING = re.compile(r"#\s*Collective test starting:\s*([A-Za-z][A-Za-z0-9_.\-]*)")


def parse_nccl_tests(text: str, *, max_records: int, now: datetime, coll: str | None = None) -> list[NcclRecord]:
    """Samples from nccl-tests output (e.g. all_reduce_perf): one per result row and group (out-of-place, in-place)."""
    columns: list[str] | None = None
    name = coll
    records: list[NcclRecord] = []
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith("#"):
            started = _STARTING.match(stripped)
            if started and coll is None:
                name = started.group(1).removesuffix("_perf").removesuffix("_mpi")[:64]
            tokens = stripped.lstrip("#").split()
            if tokens[:1] == ["size"] and {"time", "algbw", "busbw"} <= set(tokens):
                columns = tokens
            continue
        if not stripped[0].isdigit():
            continue  # a log line between results (NCCL_DEBUG=INFO, warnings)
        where = f"line {number}"
        if columns is None:
            raise PushInvalid({where: ["A result row before the column header (# size count type ... time algbw busbw ...)."]})
        tokens = stripped.split()
        if len(tokens) != len(columns):
            raise PushInvalid({where: [f"{len(tokens)} columns where the header names {len(columns)}."]})
        size, error = _number(_float(tokens[0]), 0, MAX_MSG_SIZE_BYTES, True)
        if size is None:
            raise PushInvalid({where: [f"size: {error}"]})
        groups = [i for i, c in enumerate(columns) if c == "time"]
        for group, start in enumerate(groups):
            cells = dict(zip(columns[start : start + 3], tokens[start : start + 3], strict=True))
            parsed: dict[str, float] = {}
            for key, high in (("time", MAX_EXEC_TIME_US), ("algbw", MAX_BANDWIDTH_GBS), ("busbw", MAX_BANDWIDTH_GBS)):
                value, error = _number(_float(cells.get(key, "")), 0, high, False)
                if value is None:
                    raise PushInvalid({where: [f"{key}: {error}"]})
                parsed[key] = value
            records.append(
                NcclRecord(
                    format="nccl-tests",
                    coll=name or "nccl-tests",
                    msg_size_bytes=int(size),
                    exec_time_us=float(parsed["time"]),
                    algbw_gbs=float(parsed["algbw"]),
                    busbw_gbs=float(parsed["busbw"]),
                    at=now,
                    in_place=group == 1 if len(groups) == 2 else None,
                )
            )
            if len(records) > max_records:
                raise PushInvalid({"records": [f"At most {max_records} records per push (a row gives one per group)."]})
    if not records:
        raise PushInvalid({"body": ["No nccl-tests results: expected the column header and result rows of e.g. all_reduce_perf."]})
    return records


def _float(token: str) -> float | str:
    try:
        return float(token)
    except ValueError:
        return token
