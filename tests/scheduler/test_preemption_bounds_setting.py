"""MUSTER_MAX_FAIR_SHARE_PREEMPTIONS: unset it follows MUSTER_MAX_PREEMPTIONS; a negative bound is refused at start."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
READ = (
    "import django; django.setup(); from scheduler.snapshot import policy_config; "
    "c = policy_config(); print(c.max_preemptions, c.max_fair_share_preemptions)"
)


def start(**env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MUSTER_MAX_")}
    run_env = {**clean, "DJANGO_SETTINGS_MODULE": "config.settings", **env}
    return subprocess.run([sys.executable, "-c", READ], cwd=ROOT, env=run_env, capture_output=True, text=True, timeout=120)


def test_the_fair_share_bound_follows_the_preemption_bound_unless_set() -> None:
    assert start().stdout.split() == ["3", "3"]
    assert start(MUSTER_MAX_PREEMPTIONS="4").stdout.split() == ["4", "4"]
    assert start(MUSTER_MAX_FAIR_SHARE_PREEMPTIONS="5").stdout.split() == ["3", "5"]


def test_a_negative_bound_is_refused_with_its_name() -> None:
    refused = start(MUSTER_MAX_FAIR_SHARE_PREEMPTIONS="-1")
    assert refused.returncode != 0
    assert "MUSTER_MAX_FAIR_SHARE_PREEMPTIONS must be 0 or more" in refused.stderr
