"""The embedded broker's transport: kombu's filesystem transport, each message written whole before a reader can see it.

kombu's own creates a message's file under its final name, then locks and writes it; its reader moves and reads the
file without taking the lock. A worker that polled in between read an empty message and died of a JSONDecodeError
(celery/kombu#1551), and `make run` stopped with it (twice in 22 minutes on a walk). Here a message is written under
a name the reader does not match and renamed into place, which is atomic on one filesystem: a reader sees all of a
message or none of it.

`config/settings.py` selects it for `filesystem://` broker URLs.
"""

from __future__ import annotations

import os
import uuid
from time import monotonic
from typing import Any

from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.encoding import str_to_bytes
from kombu.utils.json import dumps

PARTIAL = ".part"  # the reader takes "<stamp>_<uuid>.<queue>.msg" only


class Channel(filesystem.Channel):
    def _put(self, queue: Any, payload: Any, **kwargs: Any) -> None:  # type: ignore[override]  # kombu: its two bases differ
        # kombu's name, so the reader's order (by the stamp) is kept.
        name = os.path.join(self.data_folder_out, f"{round(monotonic() * 1000)}_{uuid.uuid4()}.{queue}.msg")
        try:
            with open(name + PARTIAL, "wb") as f:
                f.write(str_to_bytes(dumps(payload)))
            os.replace(name + PARTIAL, name)
        except OSError as exc:
            raise ChannelError(f"Cannot add file {name!r} to directory") from exc


class Transport(filesystem.Transport):
    Channel = Channel
