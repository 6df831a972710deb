"""Log filters the settings name."""

from __future__ import annotations

import logging


class ClientErrorsWithoutTraceback(logging.Filter):
    """django.request logs a refused request (PermissionDenied, a bad request) with its exception's traceback, which
    reads like a crash in a server log. Below 500 it is the client's doing: keep the line, drop the traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name == "django.request" and getattr(record, "status_code", 500) < 500:
            record.exc_info = None
            record.exc_text = None
        return True
