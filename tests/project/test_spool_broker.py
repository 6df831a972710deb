"""The embedded broker (`make run`'s): a worker polling while a message is written must not read half of it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from queue import Empty
from typing import Any

from kombu import Connection

from config import spool


def connection(folder: Path) -> Connection:
    for name in ("queue", "processed"):
        (folder / name).mkdir(exist_ok=True)
    options = {"data_folder_in": str(folder / "queue"), "data_folder_out": str(folder / "queue"), "store_processed": False}
    options |= {"processed_folder": str(folder / "processed"), "control_folder": str(folder / "control")}
    return Connection("filesystem://localhost/", transport="config.spool:Transport", transport_options=options)


def test_a_reader_polling_while_a_message_is_written_sees_none_of_it_then_all(tmp_path: Path, monkeypatch: Any) -> None:
    """kombu's own transport made the message's file first and wrote it after: a worker that polled in between read
    an empty message and died of a JSONDecodeError, and `make run` stopped with it."""
    seen_while_writing: list[object] = []
    with connection(tmp_path) as conn:
        channel = conn.default_channel
        replace = os.replace

        def poll_then_replace(src: str, dst: str) -> None:
            # The instant before the message is in place: what a worker polling now would get.
            try:
                seen_while_writing.append(channel._get("work"))
            except Empty:
                seen_while_writing.append("nothing")
            replace(src, dst)

        monkeypatch.setattr(spool.os, "replace", poll_then_replace)
        queue = conn.SimpleQueue("work")
        queue.put({"job": 7})
        monkeypatch.undo()
        assert seen_while_writing == ["nothing"]
        message = queue.get(timeout=2)
        assert message.payload == {"job": 7}
        message.ack()


def test_the_embedded_broker_settings_use_it(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "CELERY_BROKER_URL")}
    env |= {"MUSTER_DATA_DIR": str(tmp_path), "DJANGO_SETTINGS_MODULE": "config.settings"}
    code = (
        "import django; django.setup()\n"
        "from config.celery import app\n"
        "with app.connection_for_write() as c: print(type(c.transport).__module__)"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.split() == ["config.spool"]
