"""Where a webhook may point: public addresses, and the networks an admin allows.

A webhook is a URL a user gives and Muster's worker POSTs to. Left open, a user could have the worker reach what only
the site's network can (the cloud's metadata service at 169.254.169.254, an internal admin port on loopback), so every
address its host resolves to is checked when the URL is given and again before each send (the name may resolve
elsewhere by then), and redirects are not followed.
"""

from __future__ import annotations

import ipaddress
import socket
import urllib.request
from functools import lru_cache
from urllib.parse import urlsplit

from django.conf import settings

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


@lru_cache(maxsize=8)
def _allowed_networks(cidrs: tuple[str, ...]) -> tuple[IPNetwork, ...]:
    return tuple(ipaddress.ip_network(cidr, strict=False) for cidr in cidrs)


def address_allowed(address: IPAddress) -> bool:
    """A public address (not loopback, private, link-local, shared or reserved), or one in a network an admin allows."""
    if any(address in network for network in _allowed_networks(tuple(settings.MUSTER_NOTIFY_WEBHOOK_ALLOWED_NETWORKS))):
        return True
    return address.is_global and not address.is_multicast


def _addresses(host: str, port: int) -> list[IPAddress]:
    try:
        return [ipaddress.ip_address(host)]
    except ValueError:
        pass
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in infos]


def webhook_refusal(url: str, *, resolve_fails_ok: bool) -> str | None:
    """Why Muster will not POST to `url`, or None. A host that does not resolve is refused at send time; when the URL is
    given (`resolve_fails_ok`), it is let through: its DNS may not be up yet, and each send checks it again."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    try:
        addresses = _addresses(host, parts.port or (443 if parts.scheme == "https" else 80))
    except (OSError, UnicodeError):
        return None if resolve_fails_ok else f"its host {host} does not resolve"
    refused = next((a for a in addresses if not address_allowed(a)), None)
    if refused is None:
        return None
    # "its host 127.0.0.1 is 127.0.0.1" says nothing twice: a name is said with the address it resolves to.
    which = f"{refused} is" if host.strip("[]") == str(refused) else f"its host {host} is {refused},"
    return (
        f"{which} an address inside the site's network (loopback, private or link-local): webhooks go "
        "to public addresses, or to networks an admin allows (MUSTER_NOTIFY_WEBHOOK_ALLOWED_NETWORKS)"
    )


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """A redirect could lead anywhere, past the check of the URL: it is an answer like any other 3xx."""

    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


webhook_opener = urllib.request.build_opener(_NoRedirects)
