"""A Python client for Muster's REST API (/api/v1/): what the `muster` command is built on.

from muster_client import Client
client = Client.login("http://muster:8000", "me", getpass())
job = client.submit({"name": "sweep", "image": "...", "command": ["python", "train.py"],
                     "nodes": 1, "gpus_per_node": 8, "wall_time_seconds": 3600})
final = client.wait(job["id"])
"""

from __future__ import annotations

import codecs
import functools
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, TypeVar
from urllib.parse import urljoin

import requests

from muster_client.errors import ApiError, AuthError, MusterError, Unreachable, error_message

Job = dict[str, Any]
JSON = dict[str, Any]
_T = TypeVar("_T")

API = "/api/v1/"
TERMINAL_STATES = frozenset({"SUCCEEDED", "FAILED", "CANCELLED", "TIMED_OUT"})
# Holding GPUs: logs are live, `follow` streams.
ACTIVE_STATES = frozenset({"SCHEDULED", "RUNNING"})
# Answers a proxy or a restarting server gives: the request may not have reached Muster, so send it again.
RETRY_STATUSES = frozenset({502, 503, 504})
PAGE_SIZE = 500  # the API's largest page: fewest round trips
STREAM_READ_TIMEOUT = 300.0


def _index_errors(body: JSON, asked: int) -> bool:
    """A 400 whose only complaint is items of `indices`, by their places in it: indices the array does not have."""
    errors = body.get("indices")
    return set(body) == {"indices"} and isinstance(errors, dict) and all(str(p).isdigit() and int(p) < asked for p in errors)


def _reason(exc: requests.RequestException) -> str:
    text = str(exc)
    if isinstance(exc, requests.Timeout):
        return "no answer in time"
    if "Name or service not known" in text or "Failed to resolve" in text or "nodename nor servname" in text:
        return "unknown host"
    if "Connection refused" in text or "Errno 111" in text:
        return "connection refused"
    return exc.__class__.__name__


def server_url(url: str) -> str:
    """The server's base URL however it was given: `muster:8000`, `http://muster:8000/`, `.../api/v1`."""
    url = url.strip().rstrip("/")
    if "://" not in url:
        url = f"http://{url}"
    if url.endswith(API.rstrip("/")):
        url = url[: -len(API.rstrip("/"))]
    return url


class Client:
    """One server and one token. Every method raises `Unreachable`, `AuthError` or `ApiError` (all `MusterError`)."""

    def __init__(
        self,
        url: str,
        token: str | None = None,
        *,
        timeout: float = 30.0,
        retries: int = 3,
        session: requests.Session | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.url = server_url(url)
        self.token = token
        self.timeout = timeout
        self.retries = retries
        self.session = session or requests.Session()
        self._sleep = sleep
        # Set by `login`: when the new token stops working (ISO 8601), or None if it never expires.
        self.token_expires_at: str | None = None

    @classmethod
    def login(cls, url: str, username: str, password: str, *, timeout: float = 30.0) -> Client:
        """Exchange a username and password for a new token (named for the day, expiring as the site says)."""
        client = cls(url, timeout=timeout)
        answer = client._object("POST", "auth/token/", json={"username": username, "password": password}, login=True)
        if not isinstance(answer.get("token"), str):
            raise MusterError(f"the server at {client.url} answered the login without a token")
        client.token = answer["token"]
        client.token_expires_at = answer.get("expires_at")
        return client

    def revoke_token(self) -> None:
        """Revoke the token this client holds (`DELETE /api/v1/tokens/current/`): it stops working at once."""
        self._call("DELETE", "tokens/current/")

    # --- submitting -----------------------------------------------------------------------------

    def submit(self, spec: Mapping[str, Any], *, idempotency_key: str | None = None) -> Job:
        """Queue one job; returns it as the API does (`id`, `state`, ...).

        Sent with an `Idempotency-Key` (a new UUID unless given), and sent again with the same key when the
        connection fails or a proxy answers 502/503/504: the server makes the job once, however many tries.
        """
        return self._object("POST", "jobs/", json=dict(spec), retry_key=idempotency_key or str(uuid.uuid4()))

    def submit_array(self, spec: Mapping[str, Any], array: str, *, idempotency_key: str | None = None) -> JSON:
        """Queue one job per index of `array` (`0-99`, `1,3,5-7`, `0-98:2`) in one transaction.

        Returns `{"array_id", "count", "jobs"}`; each element finds MUSTER_ARRAY_INDEX in its environment.
        """
        body = {**spec, "array": array}
        return self._object("POST", "jobs/array/", json=body, retry_key=idempotency_key or str(uuid.uuid4()))

    def validate(self, spec: Mapping[str, Any], array: str | None = None) -> JSON:
        """A dry run of a submit: `{"valid": true, "count": n}` if it would be accepted now, else the submit's ApiError."""
        body = {**spec, "array": array} if array is not None else dict(spec)
        return self._object("POST", "jobs/validate/", json=body)

    def estimate(self, spec: Mapping[str, Any], array: str | None = None) -> JSON:
        """`sbatch --test-only`: whether a submit of `spec` would be accepted, which of the owner's limits it meets and
        when it would start (`{"accepted", "fits_limits", "problems", "limits", "start", "count", "array_index"}`);
        nothing is queued. With `array`, the array is checked and its first element (`array_index`) estimated."""
        body = {**spec, "array": array} if array is not None else dict(spec)
        return self._object("POST", "jobs/estimate/", json=body)

    def cancel(self, job_id: int, reason: str = "") -> Job:
        """Cancel a job, saying why if `reason` (its owner reads it); ApiError 409 if it has already ended."""
        return self._object("POST", f"jobs/{int(job_id)}/cancel/", json={"reason": reason} if reason else None)

    def cancel_many(self, job_ids: Iterable[int], reason: str = "") -> JSON:
        """`scancel 12 13 17`: cancel these jobs in one request (`POST /api/v1/jobs/cancel-many/`), one transaction, so
        none of them is started on the nodes the others free in between. Returns `{"cancelled", "ended", "not_found"}`:
        the jobs cancelled, those that had already ended, and the ids that are no job you may see."""
        body: JSON = {"ids": [int(job_id) for job_id in job_ids], **({"reason": reason} if reason else {})}
        return self._object("POST", "jobs/cancel-many/", json=body)

    def requeue(self, job_id: int, reason: str = "", *, hold: bool = False) -> Job:
        """`scontrol requeue` (`hold`: requeuehold, in the same request): stop a placed or running job and put it back
        in the queue in its place (no restart spent); ApiError 409 if it is not placed or running."""
        body = {**({"reason": reason} if reason else {}), **({"hold": True} if hold else {})}
        return self._object("POST", f"jobs/{int(job_id)}/requeue/", json=body or None)

    def hold(self, job_id: int) -> Job:
        """`scontrol hold`: keep a pending job queued but never started until released; ApiError 409 if it is not
        pending. Holding someone else's job (an admin) makes a hold only an admin may release."""
        return self._object("POST", f"jobs/{int(job_id)}/hold/")

    def release(self, job_id: int) -> Job:
        """`scontrol release`: a held job may start from the next cycle; ApiError 409 if it is not held, 403 if an admin
        holds it and you are not one."""
        return self._object("POST", f"jobs/{int(job_id)}/release/")

    def update(self, job_id: int, changes: Mapping[str, Any]) -> Job:
        """`scontrol update JobId=42 TimeLimit=2:00:00 Name=x`: change a pending job's `name`, `wall_time_seconds`,
        `priority_class`, `max_restarts` or `preemptible` (`PATCH /api/v1/jobs/{id}/`); ApiError 400 naming every field
        refused (its owner's limits as at submit), 409 if it is not pending."""
        return self._object("PATCH", f"jobs/{int(job_id)}/", json=dict(changes))

    def update_array(self, array_id: int, changes: Mapping[str, Any], indices: Iterable[int] | None = None) -> JSON:
        """`scontrol update JobId=42` of array 42: every pending element, or those of `indices` (each must be pending), in
        one request (`POST /api/v1/jobs/update-array/`), all or none. Returns `{"array_id", "name", "updated"}`."""
        body: JSON = {"array_id": int(array_id), **changes, **({"indices": sorted(indices)} if indices is not None else {})}
        return self._object("POST", "jobs/update-array/", json=body)

    def cancel_array(self, array_id: int, indices: Iterable[int] | None = None, reason: str = "") -> JSON:
        """`scancel 42` (every element of array 42 not ended yet) or `scancel 42_[1-3]` (the elements of those `indices`):
        one request (`POST /api/v1/jobs/cancel-array/`), which cancels all of them or none; ended ones are left.

        Returns `{"array_id", "name", "cancelled", "ended", "missing"}`: the jobs cancelled and those asked for that had
        already ended (as the API gives jobs; `cancelled` is empty when nothing was left to cancel), and the indices asked
        for that the array does not have (then nothing was cancelled, and `name` is empty). ApiError 404 if there is no
        such array you may see. A cancel the server throttles (429) is sent again after the wait it asks (sent twice, it
        cancels once: the second finds the elements ended).
        """
        body: JSON = {"array_id": int(array_id), **({"reason": reason} if reason else {})}
        asked = None if indices is None else list(dict.fromkeys(int(index) for index in indices))
        if asked is not None:
            body["indices"] = asked
        try:
            answer = self._post_throttled("jobs/cancel-array/", body)
        except ApiError as exc:
            refusal = exc.body if isinstance(exc.body, dict) else {}
            if exc.status == 409 and isinstance(refusal.get("ended"), list):  # nothing left to cancel: what had ended
                answer = {key: value for key, value in refusal.items() if key != "detail"}
            elif exc.status == 400 and asked is not None and _index_errors(refusal, len(asked)):
                # Each index the array lacks is named at its place in `indices`, as DRF names a list's bad items.
                missing = sorted({asked[int(place)] for place in refusal["indices"]})
                return {"array_id": int(array_id), "name": "", "cancelled": [], "ended": [], "missing": missing}
            else:
                raise
        return {**answer, "missing": []}

    def _post_throttled(self, path: str, body: JSON, tries: int = 5) -> JSON:
        """A POST that may safely be sent twice, sent again while the server throttles writes (MUSTER_THROTTLE_WRITES)."""
        for attempt in range(tries):
            try:
                return self._object("POST", path, json=body)
            except ApiError as exc:
                if exc.status != 429 or attempt == tries - 1:
                    raise
                self._sleep(min(max(exc.retry_after or 1.0, 0.5), 60.0))
        raise AssertionError("unreachable: the last try returns or raises")

    def checkpoint(self, job_id: int, *, step: int | None = None, at: str | None = None, attempt: int | None = None) -> JSON:
        """Report that the running job wrote a checkpoint (at `at`, ISO 8601; now if None): a preemption then loses only the
        work since it. With a user's token for the owner's jobs, or inside the job with its MUSTER_TELEMETRY_TOKEN.
        Returns `{"job", "attempt", "checkpointed_at", "checkpoint_step", "recorded"}`; ApiError 409 if it is not running."""
        body = {key: value for key, value in {"step": step, "at": at, "attempt": attempt}.items() if value is not None}
        return self._object("POST", f"jobs/{int(job_id)}/checkpoint/", json=body)

    # --- reading --------------------------------------------------------------------------------

    def job(self, job_id: int) -> Job:
        return self._object("GET", f"jobs/{int(job_id)}/")

    def jobs(self, **filters: Any) -> Iterator[Job]:
        """Your jobs (an admin's: everyone's), newest first, every page: `state` (a name or a list), `name`, `team`,
        `owner`, `array`, `submitted_after`, `submitted_before` (ISO 8601), `limit` (page size)."""
        params = {key: value for key, value in filters.items() if value is not None}
        params.setdefault("limit", PAGE_SIZE)
        for page in self._pages("jobs/", params):
            yield from page["results"]

    def queue(self, *, max_entries: int | None = None) -> JSON:
        """The pending queue as the last scheduling cycle ordered it: `{"count", "summary", "results"}`, every page
        (or the first `max_entries`). Each entry has `position`, `priority`, `pending_reason`, `estimated_start`."""
        results: list[JSON] = []
        first: JSON = {}
        limit = min(PAGE_SIZE, max_entries) if max_entries else PAGE_SIZE
        for page in self._pages("queue/", {"limit": limit}):
            first = first or page
            results += page["results"]
            if max_entries is not None and len(results) >= max_entries:
                results = results[:max_entries]
                break
        return {"count": first.get("count", len(results)), "summary": first.get("summary", {}), "results": results}

    def nodes(self) -> list[JSON]:
        return [node for page in self._pages("nodes/", {"limit": PAGE_SIZE}) for node in page["results"]]

    def nodes_hold(self, names: Sequence[str], reason: str) -> JSON:
        """`scontrol update NodeName=... State=DRAIN Reason=...` (admins): nothing new is placed on the nodes; all or none.
        Returns `held`, `reworded` (held already: the new reason), `unchanged`, `running` (the jobs that run on) and
        `message`; ApiError 400 naming a node the cluster does not have, 403 for a non-admin."""
        return self._object("POST", "nodes/hold/", json={"nodes": list(names), "reason": reason})

    def nodes_release(self, names: Sequence[str]) -> JSON:
        """`State=RESUME` (admins): the held nodes take new work again; `released`, and `not_held` left as they were."""
        return self._object("POST", "nodes/release/", json={"nodes": list(names)})

    def maintenance(self) -> list[JSON]:
        """The maintenance windows not over yet, earliest first (`scontrol show reservation`)."""
        value = self._call("GET", "nodes/maintenance/")
        if not isinstance(value, list):
            raise MusterError(f"the server at {self.url} gave an unexpected answer to GET nodes/maintenance/")
        return value

    def maintenance_create(self, body: JSON) -> JSON:
        """`scontrol create reservation flags=maint` (admins): `{"nodes", "start", "duration_seconds" or "end", "reason"}`;
        ApiError 400 saying why it was refused (nothing is scheduled), 403 for a non-admin."""
        return self._object("POST", "nodes/maintenance/", json=body)

    def maintenance_cancel(self, window_id: int) -> JSON:
        """`scontrol delete reservation` (admins): the window is cancelled; one on now ends at once."""
        return self._object("POST", f"nodes/maintenance/{int(window_id)}/cancel/")

    def cluster(self) -> JSON:
        """Whether jobs can start on the cluster (`usable`) and, when they cannot, why (`problem`) and `since` when."""
        return dict(self._object("GET", "nodes/", params={"limit": 1})["cluster"])

    def usage(self) -> JSON:
        """Your limits and usage now and this budget period, and each of your teams'."""
        return self._object("GET", "usage/")

    def usage_all(self, *, team: str | None = None) -> JSON:
        """Admins: every user's and every team's limits and usage this budget period, each as in `usage()`, every page:
        `{"users": [...], "teams": [...]}` by name; `team` only that team and its members. AuthError for a non-admin."""
        params = {"limit": PAGE_SIZE, **({"team": team} if team is not None else {})}
        return {kind: [a for page in self._pages(f"quotas/{kind}/", params) for a in page["results"]] for kind in ("users", "teams")}

    def logs(self, job_id: int, *, rank: int = 0, attempt: int | None = None, tail: int | None = None) -> JSON:
        """One rank's output of one attempt (the latest by default): `{"logs", "attempt", "source", "note", ...}`."""
        params = {"rank": rank, "attempt": attempt, "tail": tail}
        return self._object("GET", f"jobs/{int(job_id)}/logs/", params={k: v for k, v in params.items() if v is not None})

    def follow_logs(
        self, job_id: int, *, rank: int = 0, attempt: int | None = None, tail: int | None = None, patience: float = 300.0
    ) -> Iterator[str]:
        """The output of one attempt as it is written, in chunks, until that attempt ends; with `tail`, from its last
        `tail` lines (`tail -n N -f`), else from its start.

        The connection drops now and then: the server closes a follow after MUSTER_LOG_FOLLOW_SECONDS, restarts, or
        the attempt ends while away. Each time this connects again and goes on from where it was, by the text itself:
        it asks for the last lines, as many as it keeps of what it yielded (FOLLOW_OVERLAP_LINES) and as many again as
        may have been written meanwhile (FOLLOW_GAP_LINES), finds the end of what it yielded in them and yields what
        comes after. (Counting what it yielded from the start was wrong after --tail, whose start is not the log's, and
        read the whole log again.) A server away or failing (5xx) is asked again until it has been so for `patience`
        seconds in a row. Once the attempt has ended (or the job moved on to another), what it wrote since the drop is
        read once more, and the follow ends.
        """
        attempt = attempt or self._patiently(lambda: self.job(job_id), patience)["attempt"] or None
        seen = ""  # the end of what was yielded: its last FOLLOW_OVERLAP_LINES lines, and a line not ended yet
        last_read = False
        while True:
            params: dict[str, Any] = {"rank": rank, "follow": "true", **({"attempt": attempt} if attempt else {})}
            if seen:
                params["tail"] = seen.count("\n") + 1 + FOLLOW_GAP_LINES
            elif tail is not None:
                params["tail"] = tail
            asked, found = params.get("tail"), not seen  # before anything was yielded, all that comes is new
            before, waiting = seen, ""
            try:
                connect = functools.partial(self._send, "GET", f"jobs/{int(job_id)}/logs/", params=params, stream=True)
                response = self._patiently(connect, patience)
                with response:
                    # Incremental: a character split across two chunks is decoded whole.
                    decoder = codecs.getincrementaldecoder(response.encoding or "utf-8")(errors="replace")
                    for data in response.iter_content(chunk_size=None):
                        chunk = decoder.decode(data)
                        if not found:
                            waiting += chunk
                            chunk, found = _after(seen, waiting, asked)
                        if chunk:
                            seen = _keep_end(seen + chunk)
                            yield chunk
            except requests.RequestException:
                pass  # a dropped or silent stream: the job's state below says whether to connect again
            if not found and waiting:
                # The stream ended before the place was found whole: the log's start was cut (a kept log is its end,
                # within its size limit), or all of it came after (more lines were written while away than were
                # asked for). After the most of its end that is there, else all of it: said, rather than lost.
                rest = _after_part(seen, waiting)
                seen = _keep_end(seen + rest)
                if rest:
                    yield rest
            if last_read:
                return
            job = self._patiently(lambda: self.job(job_id), patience)
            if not (job["state"] in ACTIVE_STATES and job["attempt"] == (attempt or job["attempt"])):
                # Ended, or requeued: the attempt's output written since the drop (kept, or still in its pods) once more.
                last_read = True
                attempt = attempt or job["attempt"] or None
                continue
            if seen == before:
                # The pods have ended but the cycle has not noticed yet: give it a moment before asking again.
                self._sleep(1.0)

    def _patiently(self, ask: Callable[[], _T], patience: float, pause: float = 1.0) -> _T:
        """`ask()`, again every `pause` seconds while the server cannot be reached or fails (5xx: a restart, a deploy),
        for up to `patience` seconds in a row; a refusal (4xx) is raised at once."""
        failing_since: float | None = None
        while True:
            try:
                return ask()
            except (Unreachable, ApiError) as exc:
                if isinstance(exc, ApiError) and exc.status < 500:
                    raise
                failing_since = failing_since or time.monotonic()
                if time.monotonic() - failing_since >= patience:
                    raise
                self._sleep(pause)

    def wait(self, job_id: int, *, poll: float = 2.0, on_update: Callable[[Job], None] | None = None, patience: float = 300.0) -> Job:
        """Poll until the job has ended (SUCCEEDED, FAILED, CANCELLED, TIMED_OUT); `on_update` sees every read.

        A wait may last days: a server that is away or failing (a restart, a deploy) is asked again until it has
        been so for `patience` seconds in a row, and only then is its error raised.
        """
        while True:
            job = self._patiently(lambda: self.job(job_id), patience, pause=poll)
            if on_update is not None:
                on_update(job)
            if job["state"] in TERMINAL_STATES:
                return job
            self._sleep(poll)

    # --- the wire -------------------------------------------------------------------------------

    def _pages(self, path: str, params: dict[str, Any]) -> Iterator[JSON]:
        # DRF's `next` is an absolute URL carrying the filters and the offset.
        page = self._object("GET", path, params=params)
        yield page
        while page.get("next"):
            page = self._object("GET", page["next"])
            yield page

    def _object(self, method: str, path: str, **kwargs: Any) -> JSON:
        value = self._call(method, path, **kwargs)
        if not isinstance(value, dict):
            raise MusterError(f"the server at {self.url} gave an unexpected answer to {method} {path}")
        return value

    def _call(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        json: Any = None,
        retry_key: str | None = None,
        login: bool = False,
    ) -> Any:
        headers = {"Idempotency-Key": retry_key} if retry_key else {}
        tries = self.retries + 1 if retry_key else 1
        for attempt in range(tries):
            last = attempt == tries - 1
            try:
                response = self._send(method, path, params=params, json=json, headers=headers, login=login, retry=not last)
            except _Retry as retry:
                self._sleep(min(max(0.5 * 2**attempt, retry.after), 10.0))
                continue
            except Unreachable:
                if last:
                    raise
                self._sleep(0.5 * 2**attempt)
                continue
            if not response.content:
                return None
            try:
                return response.json()
            except ValueError:
                raise MusterError(f"{self.url} answered {method} {path} with something other than JSON: is it a Muster server?") from None
        raise AssertionError("unreachable: the last try returns or raises")

    def _send(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        json: Any = None,
        headers: Mapping[str, str] | None = None,
        stream: bool = False,
        login: bool = False,
        retry: bool = False,
    ) -> requests.Response:
        url = path if "://" in path else urljoin(self.url + API, path)
        all_headers = {"Accept": "application/json", **(headers or {})}
        if self.token and not login:
            all_headers["Authorization"] = f"Bearer {self.token}"
        try:
            # A stream may be quiet for minutes (a training step is slow): only connecting is bounded tightly.
            timeout = (self.timeout, STREAM_READ_TIMEOUT) if stream else self.timeout
            response = self.session.request(method, url, params=params, json=json, headers=all_headers, timeout=timeout, stream=stream)
        except requests.RequestException as exc:
            raise Unreachable(f"cannot reach the Muster server at {self.url} ({_reason(exc)})") from exc
        if response.status_code < 400:
            return response
        if retry and response.status_code in RETRY_STATUSES:
            raise _Retry(_retry_after(response))
        raise _error(response, self.url, login=login)


class _Retry(Exception):
    def __init__(self, after: float) -> None:
        self.after = after


# What a follow keeps of the text it yielded, to find its place again after a reconnect (whole lines), and how many
# lines beyond those it asks for then: those written while it was away.
FOLLOW_OVERLAP_LINES = 200
FOLLOW_GAP_LINES = 10_000


def _keep_end(text: str) -> str:
    """The last FOLLOW_OVERLAP_LINES lines of `text` (and the line not ended yet, if any)."""
    cut = len(text)
    for _ in range(FOLLOW_OVERLAP_LINES + 1):
        cut = text.rfind("\n", 0, cut)
        if cut < 0:
            return text
    return text[cut + 1 :]


def _after(seen: str, text: str, asked: int | None) -> tuple[str, bool]:
    """What of `text` (the last lines of the log, as a reconnect got them so far) comes after `seen` (the end of
    what was yielded), and whether `seen` was found in it. Its first place: a log that repeats itself says a line
    twice rather than lose one. Not found in the first `asked` lines, it will not be: all of it is new."""
    at = text.find(seen)
    if at >= 0:
        return text[at + len(seen) :], True
    if asked is not None and text.count("\n") > asked:
        return text, True
    return "", False


def _after_part(seen: str, text: str) -> str:
    """What of `text` comes after the longest end of `seen`, in whole lines, that it holds; all of it if none."""
    lines = seen.splitlines(keepends=True)
    for first in range(1, len(lines)):
        end = "".join(lines[first:])
        if (at := text.find(end)) >= 0:
            return text[at + len(end) :]
    return text


def _retry_after(response: requests.Response) -> float:
    try:
        return float(response.headers.get("Retry-After", "0"))
    except ValueError:
        return 0.0


def _body(response: requests.Response) -> Any:
    kind = response.headers.get("Content-Type", "")
    if "json" in kind:
        try:
            return response.json()
        except ValueError:
            return None
    # A proxy's HTML page says nothing a terminal line could use; plain text might.
    return response.text[:500] if kind.startswith("text/plain") else None


def _error(response: requests.Response, url: str, *, login: bool) -> MusterError:
    status = response.status_code
    body = _body(response)
    message = error_message(status, body, response.reason or "")
    if status == 401 and login:
        return AuthError(message)
    if status == 401:
        # The server says why (expired, revoked, unknown): "missing or expired" guessed wrong for a revoked one.
        return AuthError(f"the server refused the token: {message.rstrip('.')} — run `muster login {url}`")
    if status == 403:
        return AuthError(f"not allowed: {message}")
    if status >= 500:
        return ApiError(status, f"the server at {url} failed the request: {message}", body)
    if status == 429 and response.headers.get("Retry-After"):
        message = f"{message} (retry after {response.headers['Retry-After']} s)"
        return ApiError(status, message, body, retry_after=_retry_after(response))
    return ApiError(status, message, body)
