"""The README's word on a node lost under a running gang matches the cycle: a node NotReady is waited for
MUSTER_NODE_NOT_READY_GRACE_SECONDS before its gang is requeued (tests/scheduler/test_cycle.py drives that); it said
"at once"."""

from __future__ import annotations

import re
from pathlib import Path

from django.conf import settings

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_readme_says_a_not_ready_node_is_waited_for_its_grace() -> None:
    text = " ".join(README.read_text().split())
    said = re.search(r"stops being Ready \(or reachable\) does once it has been so for `(\w+)` \((\d+) s;", text)
    assert said, "the README no longer says how long a NotReady node's gang is waited for"
    name, seconds = said.groups()
    assert name == "MUSTER_NODE_NOT_READY_GRACE_SECONDS" and int(seconds) == settings.MUSTER_NODE_NOT_READY_GRACE_SECONDS == 60
    assert not re.search(r"stops being Ready[^;]*requeues the gang at once", text)
