"""A stand-in for requests.Session that answers from a script and records what was sent."""

from __future__ import annotations

import json
from typing import Any

import requests


def response(status: int, body: Any = None, *, headers: dict[str, str] | None = None, text: str | None = None) -> requests.Response:
    r = requests.Response()
    r.status_code = status
    r.reason = {200: "OK", 201: "Created", 400: "Bad Request", 401: "Unauthorized", 502: "Bad Gateway"}.get(status, "")
    if text is not None:
        r._content = text.encode()
        r.headers["Content-Type"] = "text/html"
    else:
        r._content = json.dumps(body).encode() if body is not None else b""
        r.headers["Content-Type"] = "application/json"
    r.headers.update(headers or {})
    r._content_consumed = True  # iter_content() then slices the body instead of reading a socket
    return r


def stream(text: str) -> requests.Response:
    """A text/plain streaming answer, as `logs/?follow=true` gives."""
    r = response(200, text="")
    r._content = text.encode()
    r.headers["Content-Type"] = "text/plain; charset=utf-8"
    r.encoding = "utf-8"
    return r


class FakeSession:
    def __init__(self, *answers: requests.Response | Exception) -> None:
        self.answers = list(answers)
        self.sent: list[dict[str, Any]] = []

    def request(self, method: str, url: str, **kwargs: Any) -> requests.Response:
        self.sent.append({"method": method, "url": url, **kwargs})
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer
