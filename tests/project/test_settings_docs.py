"""docs/settings.md lists exactly the environment variables Muster reads, each with the code's default.

The names come from config/settings.py's syntax tree (no import: what a variable defaults to must not depend
on this machine's environment), through every way it reads one: os.environ.get / os.getenv / os.environ[...],
dj_database_url.config(env=...), and its own env_* helpers (found by what their bodies do, so a new helper
is followed too). Production code outside settings.py must not read MUSTER_* variables without their being
documented either.
"""

from __future__ import annotations

import ast
import operator
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = ROOT / "config" / "settings.py"
DOC = ROOT / "docs" / "settings.md"
PRODUCTION = ["accounts", "audit", "config", "frontend", "jobs", "quotas", "telemetry", "whatif", "replay", "benchmarks", "manage.py"]
TRUE = {"1", "true", "yes", "on"}
NO_DEFAULT = object()  # not a literal: the documented default is prose, not compared


def _is_environ(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "environ" and isinstance(node.value, ast.Name) and node.value.id == "os"


def _direct_read(node: ast.AST) -> ast.AST | None:
    """The name argument of os.environ.get(...), os.getenv(...) or os.environ[...] (a read), else None."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        func = node.func
        if (func.attr == "get" and _is_environ(func.value)) or (
            func.attr == "getenv" and isinstance(func.value, ast.Name) and func.value.id == "os"
        ):
            return node.args[0]
    if isinstance(node, ast.Subscript) and _is_environ(node.value) and isinstance(node.ctx, ast.Load):
        return node.slice
    return None


def _literal(node: ast.AST | None) -> object:
    """A constant, or arithmetic on constants (14 * 24 * 3600); NO_DEFAULT for anything else."""
    ops = {ast.Mult: operator.mul, ast.Add: operator.add, ast.Sub: operator.sub, ast.Div: operator.truediv}
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in ops:
        left, right = _literal(node.left), _literal(node.right)
        if NO_DEFAULT not in (left, right):
            return ops[type(node.op)](left, right)
    return NO_DEFAULT


def _helpers(tree: ast.Module) -> dict[str, ast.FunctionDef]:
    """Functions of settings.py that read the variable named by their first parameter, directly or via another."""
    functions = {f.name: f for f in tree.body if isinstance(f, ast.FunctionDef) and f.args.args}
    found: dict[str, ast.FunctionDef] = {}
    changed = True
    while changed:
        changed = False
        for name, function in functions.items():
            if name in found:
                continue
            param = function.args.args[0].arg
            for node in ast.walk(function):
                arg = _direct_read(node)
                if arg is None and isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in found:
                    arg = node.args[0] if node.args else None
                if isinstance(arg, ast.Name) and arg.id == param:
                    found[name] = function
                    changed = True
                    break
    return found


def settings_reads() -> dict[str, list[object]]:
    """Every variable settings.py reads -> the defaults it is read with (NO_DEFAULT where not a literal)."""
    tree = ast.parse(SETTINGS.read_text())
    helpers = _helpers(tree)
    inside_helpers = {id(n) for f in helpers.values() for n in ast.walk(f)}
    reads: dict[str, list[object]] = {}
    for node in ast.walk(tree):
        if id(node) in inside_helpers:
            continue
        name_node: ast.AST | None = None
        default: object = NO_DEFAULT
        if (arg := _direct_read(node)) is not None:
            name_node = arg
            if isinstance(node, ast.Call):
                default = _literal(node.args[1]) if len(node.args) > 1 else None
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in helpers:
            name_node = node.args[0]
            params = [a.arg for a in helpers[node.func.id].args.args]
            if len(node.args) > 1:
                default = _literal(node.args[1])
            elif "default" in params:
                default = _literal(next((k.value for k in node.keywords if k.arg == "default"), None))
            else:
                default = None  # env_optional_int, env_mapping: unset means none
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "config":
            name_node = next((k.value for k in node.keywords if k.arg == "env"), None)  # dj_database_url.config(env=...)
        if name_node is None:
            continue
        assert isinstance(name_node, ast.Constant) and isinstance(name_node.value, str), (
            f"config/settings.py line {node.lineno}: an environment variable read by a name that is not a literal"
        )
        reads.setdefault(name_node.value, []).append(default)
    return reads


def production_muster_reads() -> set[str]:
    """MUSTER_* variables read outside settings.py by production code (not tests, not migrations)."""
    names: set[str] = set()
    for entry in PRODUCTION:
        path = ROOT / entry
        for file in [path] if path.is_file() else path.rglob("*.py"):
            if file == SETTINGS or "migrations" in file.parts:
                continue
            for node in ast.walk(ast.parse(file.read_text())):
                arg = _direct_read(node)
                if isinstance(arg, ast.Constant) and str(arg.value).startswith("MUSTER_"):
                    names.add(arg.value)
    return names


def documented() -> dict[str, str]:
    """docs/settings.md's table rows: variable -> its default cell."""
    rows: dict[str, str] = {}
    for line in DOC.read_text().splitlines():
        match = re.match(r"^\| `([A-Z][A-Z0-9_]*)` \|", line)
        if not match:
            continue
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        assert len(cells) == 3, f"docs/settings.md: a row needs variable | default | meaning: {line}"
        assert match.group(1) not in rows, f"docs/settings.md lists {match.group(1)} twice"
        rows[match.group(1)] = cells[1]
    return rows


def _matches(doc_default: str, code_default: object) -> bool:
    if code_default is None:
        return doc_default.startswith(("unset", "empty"))
    if code_default == "":
        return doc_default.startswith("empty")
    value = re.match(r"`([^`]*)`", doc_default)
    if value is None:
        return False
    written = value.group(1)
    if isinstance(code_default, bool):
        return (written.strip().lower() in TRUE) == code_default
    if isinstance(code_default, int | float):
        try:
            return float(written) == float(code_default)
        except ValueError:
            return False
    return written == code_default


def test_the_extractor_sees_every_kind_of_read() -> None:
    reads = settings_reads()
    # One of each: os.environ.get, env_bool, env_int, env_float, env_optional_int, env_mapping, dj_database_url.
    for name in ["REDIS_URL", "MUSTER_DEV", "MUSTER_MAX_RESTARTS", "MUSTER_CYCLE_INTERVAL_SECONDS", "MUSTER_DEFAULT_MAX_GPUS"]:
        assert name in reads
    assert {"MUSTER_K8S_EXTRA_RESOURCES", "DATABASE_URL", "KUBECONFIG"} <= set(reads)
    assert reads["MUSTER_MAX_WALL_TIME_SECONDS"] == [14 * 24 * 3600]
    assert reads["MUSTER_DEFAULT_MAX_GPUS"] == [None]


def test_every_variable_read_is_documented_and_nothing_else() -> None:
    read = set(settings_reads()) | production_muster_reads()
    listed = set(documented())
    assert not read - listed, f"read but not in docs/settings.md: {sorted(read - listed)}"
    assert not listed - read, f"in docs/settings.md but never read: {sorted(listed - read)}"


def test_documented_defaults_are_the_code_defaults() -> None:
    rows = documented()
    wrong = [
        f"{name}: code {default!r}, docs {rows[name]!r}"
        for name, defaults in settings_reads().items()
        for default in defaults
        if default is not NO_DEFAULT and name in rows and not _matches(rows[name], default)
    ]
    assert not wrong, "docs/settings.md defaults differ from config/settings.py:\n" + "\n".join(wrong)
