"""The settings in force: every environment variable Muster reads (docs/settings.md), with the value this process
runs with and what its environment says, for `manage.py muster_settings` and the admins' Settings page
(Slurm's `scontrol show config`).

The value in force is read from django.conf.settings, never parsed again from the environment, so a value settings.py
capped, derived or fell back from is shown as Muster uses it. Secrets are never shown: a password, key or token reads
"(set)", and a URL keeps its host but not its password.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from django.conf import settings

# Variables whose value is a secret: shown only as set or not.
SECRETS = frozenset({"DJANGO_SECRET_KEY", "EMAIL_HOST_PASSWORD", "MUSTER_METRICS_TOKEN"})
# Variables holding a URL that may carry a password (redis://:pw@host, postgres://user:pw@host).
URLS = frozenset({"DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "MUSTER_TELEMETRY_PROMETHEUS_URL"})
# Keys of MUSTER_LOGS_STORAGE_OPTIONS (an S3 storage's access_key, secret_key, ...) whose values are not shown.
SECRET_KEY_NAMES = re.compile(r"secret|password|token|key", re.IGNORECASE)


def _database(s: Any) -> str:
    db = s.DATABASES["default"]
    engine = str(db["ENGINE"]).rsplit(".", 1)[-1]
    if engine == "sqlite3":
        return f"SQLite: {db['NAME']}"
    where = f"{db.get('HOST') or 'localhost'}:{db.get('PORT') or ''}".rstrip(":")
    return f"{engine}: {db.get('NAME')} on {where}"


# Variables not kept as a Django setting of their own name: how settings.py holds each one.
IN_FORCE: Mapping[str, Callable[[Any], Any]] = {
    "DATABASE_URL": _database,
    "DATABASE_CONN_MAX_AGE": lambda s: s.DATABASES["default"].get("CONN_MAX_AGE"),
    "DJANGO_ALLOWED_HOSTS": lambda s: s.ALLOWED_HOSTS,
    "DJANGO_CSRF_TRUSTED_ORIGINS": lambda s: s.CSRF_TRUSTED_ORIGINS,
    "DJANGO_DEBUG": lambda s: s.DEBUG,
    "DJANGO_SECRET_KEY": lambda s: s.SECRET_KEY,
    "KUBECONFIG": lambda s: os.environ.get("KUBECONFIG"),  # only as MUSTER_K8S_KUBECONFIG's fallback
    "MUSTER_BEHIND_TLS_PROXY": lambda s: getattr(s, "SECURE_PROXY_SSL_HEADER", None) is not None,
    "MUSTER_DATA_DIR": lambda s: s.DATA_DIR,
    "MUSTER_DEV": lambda s: not s.PRODUCTION,
    "MUSTER_HSTS_INCLUDE_SUBDOMAINS": lambda s: s.SECURE_HSTS_INCLUDE_SUBDOMAINS,
    "MUSTER_HSTS_PRELOAD": lambda s: s.SECURE_HSTS_PRELOAD,
    "MUSTER_HSTS_SECONDS": lambda s: s.SECURE_HSTS_SECONDS,
    "MUSTER_LOGIN_COOLOFF_MINUTES": lambda s: s.AXES_COOLOFF_TIME,
    "MUSTER_LOGIN_FAILURE_LIMIT": lambda s: s.AXES_FAILURE_LIMIT,
    "MUSTER_LOGS_STORAGE": lambda s: s.STORAGES["joblogs"]["BACKEND"],
    "MUSTER_LOGS_STORAGE_OPTIONS": lambda s: s.STORAGES["joblogs"].get("OPTIONS"),
    "MUSTER_LOG_LEVEL": lambda s: s.LOGGING["root"]["level"],
    "MUSTER_MAX_REQUEST_BYTES": lambda s: s.DATA_UPLOAD_MAX_MEMORY_SIZE,
    "MUSTER_SECURE_COOKIES": lambda s: s.SESSION_COOKIE_SECURE,
    "MUSTER_SSL_REDIRECT": lambda s: s.SECURE_SSL_REDIRECT,
    "MUSTER_STATIC_ROOT": lambda s: s.STATIC_ROOT,
    "MUSTER_TIME_ZONE": lambda s: s.TIME_ZONE,
}
# Variables kept as a Django setting of the same name that does not start with MUSTER_ (those that do are all found).
# MUSTER_* variables that only the development scripts, the tests or a job's own pods read (docs/settings.md, "Not
# settings"): set, they are no typo.
NOT_SETTINGS = frozenset(
    {
        "MUSTER_TESTCLUSTER_DIR",
        "MUSTER_TESTCLUSTER_CACHE",
        "MUSTER_PROMETHEUS3_MODULE",
        "MUSTER_PROMETHEUS3_CACHE",
        "MUSTER_PROMETHEUS3_BIN",
        "MUSTER_TEST_REDIS_PORT",
        "MUSTER_REQUIRE_SERVICES",
        "MUSTER_CHROMIUM",
        "MUSTER_SCREENSHOTS",
        "MUSTER_TEST_KUBECONFIG",
        "MUSTER_TEST_OUTAGE_SECONDS",
        "MUSTER_TEST_SCHEMATHESIS_EXAMPLES",
        "MUSTER_HOSTS",
        "MUSTER_TELEMETRY_TOKEN",
        "MUSTER_TELEMETRY_URL",
        "MUSTER_CHECKPOINT_URL",
        "MUSTER_JOB_ID",
        "MUSTER_ATTEMPT",
        "MUSTER_ARRAY_ID",
        "MUSTER_ARRAY_INDEX",
        "MUSTER_MIN_NODES",
        "MUSTER_MAX_NODES",
        "MUSTER_GPU_SHARING",
        "MUSTER_GPU_SHARE",
        "MUSTER_GPU_MEMORY_GB",
        # make run's own (scripts/run-local.sh, config/gunicorn_ready.py): every make run set two of them, and the
        # Settings page called them misspelt.
        "MUSTER_GUNICORN_READY_FILE",
        "MUSTER_RUN_SIGINT_DEFAULT",
        "MUSTER_STOP_SECONDS",
        # The muster command's (client/): an admin's shell that has them is no typo either.
        "MUSTER_URL",
        "MUSTER_TOKEN",
        "MUSTER_PASSWORD",
    }
)
SAME_NAME = (
    "CELERY_BROKER_URL",
    "CELERY_TASK_DEFAULT_QUEUE",
    "DEFAULT_FROM_EMAIL",
    "EMAIL_BACKEND",
    "EMAIL_HOST",
    "EMAIL_HOST_PASSWORD",
    "EMAIL_HOST_USER",
    "EMAIL_PORT",
    "EMAIL_USE_TLS",
    "REDIS_URL",
)


@dataclass(frozen=True)
class Setting:
    name: str
    value: str  # in force, as words: "on", "unset", "a, b"
    environment: str | None  # as this process's environment has it (masked like `value`); None: not set there

    @property
    def from_environment(self) -> bool:
        return self.environment is not None


def variable_names() -> list[str]:
    """Every environment variable Muster's settings read, by name."""
    muster = [name for name in dir(settings) if name.startswith("MUSTER_")]
    return sorted({*muster, *IN_FORCE, *SAME_NAME})


def _words(value: Any) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, timedelta):
        return f"{value.total_seconds() / 60:g} min"
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, (list, tuple, set, frozenset)):
        return ", ".join(_words(v) for v in value) or "empty"
    if isinstance(value, dict):
        return json.dumps(value, default=str, sort_keys=True)
    return "empty" if value == "" else str(value)


def _mask_url(text: str) -> str:
    parts = urlsplit(text)
    if parts.password is None:
        return text
    host = parts.hostname or ""
    if parts.port:
        host += f":{parts.port}"
    user = f"{parts.username}:***@" if parts.username else ":***@"
    return urlunsplit(parts._replace(netloc=user + host))


def _mask_options(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: "***" if SECRET_KEY_NAMES.search(str(k)) else _mask_options(v) for k, v in value.items()}
    return value


def _shown(name: str, value: Any, *, raw: bool) -> str:
    """`value` (in force, or the environment's text when `raw`) as it may be shown."""
    if name in SECRETS:
        return "(set)" if value else "(not set)"
    if name in URLS and isinstance(value, str) and value:  # an empty one reads "empty" below, as any other: it read blank
        return _mask_url(value)
    if name == "MUSTER_LOGS_STORAGE_OPTIONS":
        if raw:
            try:
                value = json.loads(value)
            except ValueError:
                return "(not JSON)"
        return _words(_mask_options(value))
    return value if raw else _words(value)


def effective_settings(environ: Mapping[str, str] | None = None) -> list[Setting]:
    """Each variable Muster reads, by name: the value in force and what the environment says (None: not set)."""
    environ = os.environ if environ is None else environ
    found = []
    for name in variable_names():
        getter = IN_FORCE.get(name)
        value = getter(settings) if getter is not None else getattr(settings, name, None)
        raw = environ.get(name)
        found.append(Setting(name, _shown(name, value, raw=False), None if raw is None else _shown(name, raw, raw=True)))
    return found


def unknown_variables(environ: Mapping[str, str] | None = None) -> list[str]:
    """MUSTER_* variables set in the environment that neither Muster nor its scripts read: a typo
    (MUSTER_DEFAULT_MAX_GPU for MUSTER_DEFAULT_MAX_GPUS) that otherwise leaves the default in force unsaid, or Muster dropped."""
    environ = os.environ if environ is None else environ
    known = set(variable_names()) | NOT_SETTINGS
    return sorted(name for name in environ if name.startswith("MUSTER_") and name not in known)
