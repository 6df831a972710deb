"""GET /metrics: the Prometheus exposition, guarded by a bearer token or, without one, loopback only."""

from __future__ import annotations

import hmac
import ipaddress

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST

from telemetry.exporter import metrics_text


def _loopback(request: HttpRequest) -> bool:
    # REMOTE_ADDR only, never X-Forwarded-For: a header is the client's to write. Behind a proxy every
    # request comes from the proxy, so set MUSTER_METRICS_TOKEN there.
    try:
        return ipaddress.ip_address(request.META.get("REMOTE_ADDR", "")).is_loopback
    except ValueError:
        return False


def _authorized(request: HttpRequest) -> tuple[bool, int]:
    token = settings.MUSTER_METRICS_TOKEN
    if not token:
        return _loopback(request), 403
    scheme, _, presented = request.headers.get("Authorization", "").partition(" ")
    # Constant-time, so response timing does not leak the token a character at a time.
    ok = scheme.lower() == "bearer" and hmac.compare_digest(presented.strip().encode(), token.encode())
    return ok, 401


@require_GET
def metrics_view(request: HttpRequest) -> HttpResponse:
    ok, status = _authorized(request)
    if not ok:
        if status == 401:
            response = HttpResponse("A bearer token is required (MUSTER_METRICS_TOKEN).\n", status=401, content_type="text/plain")
            response["WWW-Authenticate"] = 'Bearer realm="muster-metrics"'
            return response
        return HttpResponse("/metrics answers loopback only unless MUSTER_METRICS_TOKEN is set.\n", status=403, content_type="text/plain")
    return HttpResponse(metrics_text(), content_type=CONTENT_TYPE_LATEST)
