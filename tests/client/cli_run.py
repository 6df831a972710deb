"""Running the `muster` command in the test's own process, as a user would type it."""

from __future__ import annotations

import pytest
from muster_client import cli


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """The exit code, stdout and stderr of `muster <argv>`."""
    try:
        code = cli.main(list(argv))
    except SystemExit as exc:  # argparse's own errors and --help
        code = int(exc.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def run_live(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """As `run`, against the live server in this process, whose log of its 4xx answers shares stderr (and, when an
    earlier test left its log handler on a closed stream, a "--- Logging error ---" report): stderr is the command's
    own lines only."""
    code, out, err = run(capsys, *argv)
    return code, out, "".join(line for line in err.splitlines(keepends=True) if line.startswith("muster:"))
