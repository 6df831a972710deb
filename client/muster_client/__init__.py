"""Muster's Python client and the `muster` command. `from muster_client import Client`."""

from muster_client.client import TERMINAL_STATES, Client
from muster_client.errors import ApiError, AuthError, MusterError, Unreachable

__all__ = ["TERMINAL_STATES", "ApiError", "AuthError", "Client", "MusterError", "Unreachable"]
