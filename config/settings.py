"""Settings, all from the environment with safe local defaults (12-factor).

With nothing set, Muster runs on a laptop: SQLite, an embedded Celery transport
(a spool directory, no server) and the simulated cluster. Production and the test
suite set DATABASE_URL, REDIS_URL and MUSTER_CLUSTER.
"""

from __future__ import annotations

import json
import os
import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_number(name: str, default: float | None, cast: type = float) -> Any:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        return cast(value)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} must be {'an integer' if cast is int else 'a number'}, got {value!r}") from exc


def env_int(name: str, default: int) -> int:
    return env_number(name, default, int)


def env_float(name: str, default: float) -> float:
    return env_number(name, default, float)


def env_optional_int(name: str) -> int | None:
    """An integer, or None (unlimited) when the variable is unset or empty."""
    return env_number(name, None, int)


def env_optional_float(name: str) -> float | None:
    return env_number(name, None, float)


DEBUG = env_bool("DJANGO_DEBUG", False)
# Where the embedded defaults keep their files (SQLite database, broker spool).
DATA_DIR = Path(os.environ.get("MUSTER_DATA_DIR", BASE_DIR / "var"))

SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "")
if not SECRET_KEY:
    if not env_bool("MUSTER_DEV", True):
        raise ImproperlyConfigured("DJANGO_SECRET_KEY must be set when MUSTER_DEV=0")
    # Local-only key: production sets MUSTER_DEV=0, which makes the key mandatory.
    SECRET_KEY = "muster-local-development-key-not-for-production"

# --- Deployment security (docs/deployment.md) -------------------------------------------------
# In production (MUSTER_DEV=0) every check of `manage.py check --deploy` holds by default: cookies only over
# https, http redirected to https, HSTS for a year with subdomains and the preload flag. Each can be turned
# off for a site that needs it (e.g. MUSTER_SSL_REDIRECT=0 when nothing serves https yet).
PRODUCTION = not env_bool("MUSTER_DEV", True)
SESSION_COOKIE_SECURE = env_bool("MUSTER_SECURE_COOKIES", PRODUCTION)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
# A stale form's page keeps what was entered, to send again (frontend/errors.py).
CSRF_FAILURE_VIEW = "frontend.errors.csrf_failure"
SECURE_SSL_REDIRECT = env_bool("MUSTER_SSL_REDIRECT", PRODUCTION)
# Prometheus scrapes /metrics over plain http inside the cluster; a redirect would break the scrape.
SECURE_REDIRECT_EXEMPT = [r"^metrics$"]
SECURE_HSTS_SECONDS = env_int("MUSTER_HSTS_SECONDS", 365 * 24 * 3600 if PRODUCTION else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("MUSTER_HSTS_INCLUDE_SUBDOMAINS", PRODUCTION)
SECURE_HSTS_PRELOAD = env_bool("MUSTER_HSTS_PRELOAD", PRODUCTION)
# Behind a proxy or ingress that terminates TLS and sets X-Forwarded-Proto (and strips what clients send).
if env_bool("MUSTER_BEHIND_TLS_PROXY", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
# Pages may load scripts, styles, images and data from Muster itself only: no inline script, no other origin
# (Plotly is served by Muster). Inline styles stay allowed: Plotly writes its own at run time.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'", "'unsafe-inline'"],
        "img-src": ["'self'", "data:", "blob:"],
        "font-src": ["'self'", "data:"],
        "worker-src": ["'self'", "blob:"],
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    }
}

ALLOWED_HOSTS = [h.strip() for h in os.environ.get("DJANGO_ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]").split(",") if h.strip()]
CSRF_TRUSTED_ORIGINS = [o.strip() for o in os.environ.get("DJANGO_CSRF_TRUSTED_ORIGINS", "").split(",") if o.strip()]
# The audit trail records the client's address from the first X-Forwarded-For entry only when this is on:
# a proxy in front of Muster sets that header and drops what clients send. Off, REMOTE_ADDR is recorded.
MUSTER_TRUSTED_PROXY = env_bool("MUSTER_TRUSTED_PROXY", False)

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "axes",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "csp",
    # Muster's apps, lowest layer first (docs/architecture.md, "Layers").
    "audit",
    "accounts",
    "jobs",
    "quotas",
    "scheduler",
    "telemetry",
    "notify",
    "api",
    "whatif",
    "frontend",
]

MIDDLEWARE = [
    # First, so a database that is away while sessions or accounts are read still answers 503, not 500.
    "config.middleware.DatabaseUnavailableMiddleware",
    # Before any view parses it, so a deeply nested body or a NUL in the query is a 400 everywhere, login or not.
    "config.middleware.MalformedInputMiddleware",
    # A query parameter an API operation does not document is a 400 naming it, on every endpoint alike.
    "apikit.query_parameters.UnknownQueryParametersMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "config.middleware.SlashRedirectMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    # Last: turns a sign-in that django-axes locked out into accounts.throttling.lockout_response (429).
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "frontend.context_processors.cluster",
            ],
        },
    },
]

DATA_DIR.mkdir(parents=True, exist_ok=True)
DATABASES = {
    "default": dj_database_url.config(
        env="DATABASE_URL",
        default=f"sqlite:///{DATA_DIR / 'muster.sqlite3'}",
        conn_max_age=env_int("DATABASE_CONN_MAX_AGE", 0),
        # A kept connection is checked before a request reuses it, so a restarted database costs no failed request.
        conn_health_checks=True,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Web, worker and beat share one SQLite file: wait for the writer instead of failing.
    DATABASES["default"].setdefault("OPTIONS", {})["timeout"] = 20
    DATABASES["default"]["OPTIONS"]["transaction_mode"] = "IMMEDIATE"
    DATABASES["default"]["OPTIONS"]["init_command"] = "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
# django-axes counts failed sign-ins (the login form, Django admin, the API's password exchange) in the database.
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]

# --- Brute force and request rates (docs/security.md) ----------------------------------------
# This many failed sign-ins within the cool-off for one username, or from one address, lock that username or address
# out until the cool-off has passed since the last failure (429, Retry-After); the right password is refused meanwhile.
# A success does not clear the count: otherwise a guesser holding any valid account could reset it between guesses.
AXES_FAILURE_LIMIT = max(1, env_int("MUSTER_LOGIN_FAILURE_LIMIT", 10))
AXES_COOLOFF_TIME = timedelta(minutes=max(1, env_int("MUSTER_LOGIN_COOLOFF_MINUTES", 15)))
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]
AXES_RESET_ON_SUCCESS = False
AXES_LOCKOUT_CALLABLE = "accounts.throttling.lockout_response"
AXES_VERBOSE = False
# The client's address: REMOTE_ADDR, unless a trusted proxy in front sets X-Forwarded-For (MUSTER_TRUSTED_PROXY).
AXES_IPWARE_META_PRECEDENCE_ORDER = ["HTTP_X_FORWARDED_FOR", "REMOTE_ADDR"] if MUSTER_TRUSTED_PROXY else ["REMOTE_ADDR"]
# Writes (submits, cancels, quota edits, tokens) per signed-in user, and password exchanges per address,
# right or wrong; DRF's "N/second|minute|hour|day" form, empty for no limit. Counted in the cache.
MUSTER_THROTTLE_WRITES = os.environ.get("MUSTER_THROTTLE_WRITES", "120/minute")
MUSTER_THROTTLE_TOKEN_REQUESTS = os.environ.get("MUSTER_THROTTLE_TOKEN_REQUESTS", "60/minute")
# A submit's dry runs (validate, estimate) per signed-in user: not writes, but an estimate plans the whole queue.
MUSTER_THROTTLE_DRY_RUNS = os.environ.get("MUSTER_THROTTLE_DRY_RUNS", "300/minute")
# Checkpoint reports per job (`POST /api/v1/jobs/{id}/checkpoint/`): room for every rank of a large gang to report one.
MUSTER_THROTTLE_CHECKPOINTS = os.environ.get("MUSTER_THROTTLE_CHECKPOINTS", "120/minute")
# A token made by the password exchange (POST /api/v1/auth/token/) expires after this many days; 0: never.
MUSTER_TOKEN_EXCHANGE_EXPIRY_DAYS = env_int("MUSTER_TOKEN_EXCHANGE_EXPIRY_DAYS", 30)

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "frontend:job-list"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = os.environ.get("MUSTER_TIME_ZONE", "UTC")
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = Path(os.environ.get("MUSTER_STATIC_ROOT", DATA_DIR / "static"))
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    # Job output kept when a gang ends (jobs.logs): a directory under the data dir, or any storage by settings
    # (e.g. django-storages' S3Storage with its OPTIONS as JSON: docs/deployment.md).
    "joblogs": {
        "BACKEND": os.environ.get("MUSTER_LOGS_STORAGE", "django.core.files.storage.FileSystemStorage"),
        "OPTIONS": json.loads(os.environ["MUSTER_LOGS_STORAGE_OPTIONS"])
        if os.environ.get("MUSTER_LOGS_STORAGE_OPTIONS")
        else {"location": str(DATA_DIR / "joblogs")},
    },
    # `collectstatic` (make run, the image) fingerprints and compresses them; pages then link names cached for a year.
    "staticfiles": {"BACKEND": "config.static_storage.FingerprintedStaticStorage"},
}
# Before any collectstatic (tests, a first runserver), serve static files straight from the apps.
WHITENOISE_USE_FINDERS = True
# Plotly's JavaScript comes from the installed plotly package (no CDN): a finder serves it and collectstatic copies it.
STATICFILES_FINDERS = [
    "django.contrib.staticfiles.finders.FileSystemFinder",
    "django.contrib.staticfiles.finders.AppDirectoriesFinder",
    "telemetry.staticfiles.PlotlyFinder",
]
WHITENOISE_AUTOREFRESH = DEBUG

# Request bodies: a job submission is small; refuse anything large before parsing it.
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("MUSTER_MAX_REQUEST_BYTES", 256 * 1024)

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "accounts.authentication.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PAGINATION_CLASS": "apikit.pagination.Pagination",
    "PAGE_SIZE": 50,
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    # drf-spectacular's, saying minItems of a list that may not be empty (apikit/schema.py).
    "DEFAULT_SCHEMA_CLASS": "apikit.schema.AutoSchema",
    # JSON only: a list-valued `command` has no unambiguous form encoding.
    # A JSON object at that: `null` or a list is a 400 saying so (apikit/parsers.py).
    "DEFAULT_PARSER_CLASSES": ["apikit.parsers.JSONObjectParser"],
    "EXCEPTION_HANDLER": "apikit.errors.exception_handler",
    # An unknown ?format= is a 400 naming it (DRF's own answer is a 404, as if the endpoint did not exist).
    "DEFAULT_CONTENT_NEGOTIATION_CLASS": "apikit.negotiation.FormatParameterNegotiation",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
    "DEFAULT_THROTTLE_CLASSES": ["accounts.throttling.WriteRateThrottle"],
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Muster API",
    "DESCRIPTION": "Submit, queue and follow multi-node GPU jobs on a shared cluster.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    # Swagger UI served from the installed sidecar package: the docs work offline.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # Jobs and nodes both have a `state`; name their enums apart.
    "ENUM_NAME_OVERRIDES": {
        "JobStateEnum": "jobs.states.JobState",
        "NodeStateEnum": "jobs.models.NodeState",
        "EstimateKindEnum": "jobs.models.EstimateKind",
        "TokenStateEnum": ["active", "expired", "revoked"],
    },
    # Every error each operation can answer with, and `additionalProperties: false` on strict request bodies; the
    # submits' Location and Idempotent-Replayed headers.
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "apikit.schema.document_errors",
        "api.schema.document_submit_headers",
    ],
}

# --- Celery and the cache -----------------------------------------------------
REDIS_URL = os.environ.get("REDIS_URL", "")
# The live job page's renders are shared for a few seconds between its viewers: across web
# workers through Redis when there is one, else within each process.
CACHES = {
    "default": {
        # Fails open (config/cache.py): while Redis is away the cache is a miss, never a 500.
        "BACKEND": "config.cache.FailOpenRedisCache",
        "LOCATION": REDIS_URL,
        "KEY_PREFIX": "muster",
        "OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 2},
    }
    if REDIS_URL
    else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
}
# The host names nothing for the spool broker; given, kombu does not warn at every start that none was.
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", REDIS_URL or "filesystem://localhost/")
CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, object] = {}
if CELERY_BROKER_URL.startswith("filesystem://"):
    # The embedded broker: a spool directory shared by web, worker and beat on one machine.
    _spool = DATA_DIR / "broker"
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_spool / "queue"),
        "data_folder_out": str(_spool / "queue"),
        "processed_folder": str(_spool / "processed"),
        # kombu's exchange table; its default is ./control, in whatever directory a process started from.
        "control_folder": str(_spool / "control"),
        "store_processed": False,
    }
    for _folder in ("queue", "processed", "control"):
        (_spool / _folder).mkdir(parents=True, exist_ok=True)
    # kombu's filesystem transport with whole writes (config/spool.py): its own lets a worker read a message being
    # written and die of it.
    CELERY_BROKER_TRANSPORT = "config.spool:Transport"
else:
    # Longer than any task's hard time limit, so an unacked task is not redelivered while it runs.
    CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 3600}
CELERY_TASK_DEFAULT_QUEUE = os.environ.get("CELERY_TASK_DEFAULT_QUEUE", "muster")
# What-if replays (whatif/tasks.py) run for minutes to hours: their own queue and worker (`-Q <queue>-whatif`),
# so a replay never holds up the scheduling cycle.
WHATIF_QUEUE = f"{CELERY_TASK_DEFAULT_QUEUE}-whatif"
CELERY_TASK_ROUTES = {"whatif.tasks.whatif_run": {"queue": WHATIF_QUEUE}}
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_TIME_LIMIT = 300
CELERY_TASK_SOFT_TIME_LIMIT = 240
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# A worker whose broker is away keeps trying for as long as it takes (Celery's default gives up after 100 tries
# and exits); the jobs it would have moved are found again by the first cycle after the broker is back.
CELERY_BROKER_CONNECTION_MAX_RETRIES = None
CELERY_TIMEZONE = TIME_ZONE

# --- Muster -----------------------------------------------------------------
MUSTER_CLUSTER = os.environ.get("MUSTER_CLUSTER", "simulated")
if MUSTER_CLUSTER not in {"simulated", "kubernetes"}:
    raise ImproperlyConfigured(f"MUSTER_CLUSTER must be 'simulated' or 'kubernetes', got {MUSTER_CLUSTER!r}")

# Seconds between scheduling cycles fired by beat; submits, finishes and cancels fire one at once.
MUSTER_CYCLE_INTERVAL_SECONDS = env_float("MUSTER_CYCLE_INTERVAL_SECONDS", 2.0)
# Longest wall time a job may ask for (site maximum), 14 days by default.
MUSTER_MAX_WALL_TIME_SECONDS = env_int("MUSTER_MAX_WALL_TIME_SECONDS", 14 * 24 * 3600)
MUSTER_MAX_RESTARTS = env_int("MUSTER_MAX_RESTARTS", 10)
# Priority classes, highest first. Their order is the scheduling order in this version.
MUSTER_PRIORITY_CLASSES = [
    c.strip() for c in os.environ.get("MUSTER_PRIORITY_CLASSES", "production,normal,preemptible").split(",") if c.strip()
]
MUSTER_DEFAULT_PRIORITY_CLASS = os.environ.get("MUSTER_DEFAULT_PRIORITY_CLASS", "normal")
if MUSTER_DEFAULT_PRIORITY_CLASS not in MUSTER_PRIORITY_CLASSES:
    raise ImproperlyConfigured("MUSTER_DEFAULT_PRIORITY_CLASS must be one of MUSTER_PRIORITY_CLASSES")


def _priority_class_access(raw: str | None, classes: list[str], default: str) -> dict[str, frozenset[str]]:
    """`production=infra,serving;urgent=` -> who may submit in each class listed: admins, and jobs submitted for one of
    the teams named (none: admins only). A class not listed is open to all. Unset: the highest class, unless it is
    the default one, is for admins only, as Slurm gives a QOS to no one until an admin does."""
    if raw is None:
        return {classes[0]: frozenset()} if classes[0] != default else {}
    access: dict[str, frozenset[str]] = {}
    for part in (p.strip() for p in raw.split(";") if p.strip()):
        name, sep, teams = part.partition("=")
        if not sep or name.strip() not in classes:
            raise ImproperlyConfigured(
                f"MUSTER_PRIORITY_CLASS_ACCESS: {part!r} is not <class>=<team>,<team> of a class of MUSTER_PRIORITY_CLASSES"
            )
        if name.strip() == default:
            raise ImproperlyConfigured(f"MUSTER_PRIORITY_CLASS_ACCESS: the default class {default!r} must be open to all")
        access[name.strip()] = frozenset(t.strip() for t in teams.split(",") if t.strip())
    return access


MUSTER_PRIORITY_CLASS_ACCESS = _priority_class_access(
    os.environ.get("MUSTER_PRIORITY_CLASS_ACCESS"), MUSTER_PRIORITY_CLASSES, MUSTER_DEFAULT_PRIORITY_CLASS
)
# How many jobs one cycle examines, so a huge queue cannot stall the cycle.
MUSTER_CYCLE_MAX_JOBS = env_int("MUSTER_CYCLE_MAX_JOBS", 5000)

# The simulated cluster (the embedded default): N nodes x G GPUs spread over R racks.
MUSTER_SIM_NODES = env_int("MUSTER_SIM_NODES", 16)
MUSTER_SIM_GPUS_PER_NODE = env_int("MUSTER_SIM_GPUS_PER_NODE", 8)
MUSTER_SIM_RACKS = env_int("MUSTER_SIM_RACKS", 2)
# RDMA devices on each node of the simulated cluster's first rack (the other racks have none).
MUSTER_SIM_RDMA_DEVICES = env_int("MUSTER_SIM_RDMA_DEVICES", 8)
# Nodes of the simulated cluster whose GPUs are shared, beyond MUSTER_SIM_NODES: comma-separated MODE:SLICES:NODES,
# MODE one of time-slicing, mps (SLICES replicas per GPU) or mig (SLICES a profile such as 1g.10gb). Empty: none.
MUSTER_SIM_SHARED_NODES = os.environ.get("MUSTER_SIM_SHARED_NODES", "time-slicing:4:1,mig:1g.10gb:1")
# Seconds a simulated pod takes to start, and how long a job runs when it says nothing.
MUSTER_SIM_START_SECONDS = env_float("MUSTER_SIM_START_SECONDS", 1.0)
MUSTER_SIM_DEFAULT_DURATION_SECONDS = env_float("MUSTER_SIM_DEFAULT_DURATION_SECONDS", 30.0)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    # A refused request (403, 404) is the client's, not a fault of the server's: logged in a line, without a traceback.
    "filters": {"client_errors_plain": {"()": "config.logging_filters.ClientErrorsWithoutTraceback"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain", "filters": ["client_errors_plain"]}},
    "root": {"handlers": ["console"], "level": os.environ.get("MUSTER_LOG_LEVEL", "INFO")},
    "loggers": {"django.db.backends": {"level": "WARNING"}},
}
# A gang whose pods are not all running this long after launch is torn down and requeued.
MUSTER_LAUNCH_TIMEOUT_SECONDS = env_int("MUSTER_LAUNCH_TIMEOUT_SECONDS", 600)
# A node back to Ready after being NotReady takes no new work for this long (one that flaps would fail gang after gang).
MUSTER_NODE_SETTLE_SECONDS = env_int("MUSTER_NODE_SETTLE_SECONDS", 120)
# How long a node may be NotReady before the gangs on it are requeued (their pods may be running on through a kubelet's
# blip; Kubernetes waits 300 s before it evicts them).
MUSTER_NODE_NOT_READY_GRACE_SECONDS = env_int("MUSTER_NODE_NOT_READY_GRACE_SECONDS", 60)
# After this many gangs in a row failed on a node and then succeeded elsewhere, Muster holds it out of placement until an admin clears it.
MUSTER_NODE_FAILURE_HOLD = max(1, env_int("MUSTER_NODE_FAILURE_HOLD", 3))
# A launch that does not come up (refused, or not running within the timeout) requeues the job held back
# this long, doubling with each failure in a row up to the maximum; this many in a row fail the job.
MUSTER_LAUNCH_BACKOFF_SECONDS = env_int("MUSTER_LAUNCH_BACKOFF_SECONDS", 15)
MUSTER_LAUNCH_BACKOFF_MAX_SECONDS = env_int("MUSTER_LAUNCH_BACKOFF_MAX_SECONDS", 600)
MUSTER_LAUNCH_MAX_FAILURES = max(1, env_int("MUSTER_LAUNCH_MAX_FAILURES", 5))

# --- Quotas and the usage ledger ----------------------------------------------
# The site default quota, for users with no quota of their own (unset = unlimited).
# Teams with no quota are unlimited, with weight 1.
MUSTER_DEFAULT_MAX_GPUS = env_optional_int("MUSTER_DEFAULT_MAX_GPUS")
MUSTER_DEFAULT_MAX_WALL_TIME_SECONDS = env_optional_int("MUSTER_DEFAULT_MAX_WALL_TIME_SECONDS")
MUSTER_DEFAULT_MAX_NODE_HOURS_PER_JOB = env_optional_float("MUSTER_DEFAULT_MAX_NODE_HOURS_PER_JOB")
MUSTER_DEFAULT_NODE_HOURS_PER_PERIOD = env_optional_float("MUSTER_DEFAULT_NODE_HOURS_PER_PERIOD")
MUSTER_DEFAULT_FAIR_SHARE_WEIGHT = env_float("MUSTER_DEFAULT_FAIR_SHARE_WEIGHT", 1.0)
if MUSTER_DEFAULT_FAIR_SHARE_WEIGHT <= 0:
    raise ImproperlyConfigured("MUSTER_DEFAULT_FAIR_SHARE_WEIGHT must be greater than 0")
for _name, _least in (
    ("MUSTER_DEFAULT_MAX_GPUS", 0),
    ("MUSTER_DEFAULT_MAX_WALL_TIME_SECONDS", 1),
    ("MUSTER_DEFAULT_MAX_NODE_HOURS_PER_JOB", 0),
    ("MUSTER_DEFAULT_NODE_HOURS_PER_PERIOD", 0),
):
    if globals()[_name] is not None and globals()[_name] < _least:
        raise ImproperlyConfigured(f"{_name} must be at least {_least}, or unset for unlimited")
# Node-hour budgets reset every calendar month or ISO week (Monday), in TIME_ZONE.
MUSTER_BUDGET_PERIOD = os.environ.get("MUSTER_BUDGET_PERIOD", "month")
if MUSTER_BUDGET_PERIOD not in {"month", "week"}:
    raise ImproperlyConfigured(f"MUSTER_BUDGET_PERIOD must be 'month' or 'week', got {MUSTER_BUDGET_PERIOD!r}")
# Fair share counts past usage decayed by half every this many seconds (7 days by default).
MUSTER_FAIR_SHARE_HALF_LIFE_SECONDS = env_float("MUSTER_FAIR_SHARE_HALF_LIFE_SECONDS", 7 * 24 * 3600.0)
if MUSTER_FAIR_SHARE_HALF_LIFE_SECONDS <= 0:
    raise ImproperlyConfigured("MUSTER_FAIR_SHARE_HALF_LIFE_SECONDS must be greater than 0")

# --- The fair-share queue (docs/architecture.md, "The policy") ----------------------
MUSTER_PRIORITY_WEIGHT_FAIR_SHARE = env_float("MUSTER_PRIORITY_WEIGHT_FAIR_SHARE", 1000.0)
MUSTER_PRIORITY_WEIGHT_AGE = env_float("MUSTER_PRIORITY_WEIGHT_AGE", 500.0)
MUSTER_PRIORITY_WEIGHT_CLASS = env_float("MUSTER_PRIORITY_WEIGHT_CLASS", 10000.0)
MUSTER_PRIORITY_WEIGHT_SIZE = env_float("MUSTER_PRIORITY_WEIGHT_SIZE", 100.0)
MUSTER_PRIORITY_WEIGHT_SHORT = env_float("MUSTER_PRIORITY_WEIGHT_SHORT", 2000.0)
# The short-wall-time factor falls from 1 (an hour or less) to 0 at this wall time.
MUSTER_PRIORITY_SHORT_MAX_SECONDS = env_float("MUSTER_PRIORITY_SHORT_MAX_SECONDS", 7 * 24 * 3600)
# The age factor reaches 1 after a job has waited this long.
MUSTER_PRIORITY_AGE_MAX_SECONDS = env_float("MUSTER_PRIORITY_AGE_MAX_SECONDS", 7 * 24 * 3600)
# A job waiting this long (a single-node job at least MUSTER_STARVATION_WALL_FACTOR x its wall time) gets a reservation
# and keeps it until it starts; MUSTER_MAX_RESERVATIONS bounds the cycle's work.
MUSTER_STARVATION_SECONDS = env_float("MUSTER_STARVATION_SECONDS", 3600)
MUSTER_STARVATION_WALL_FACTOR = env_float("MUSTER_STARVATION_WALL_FACTOR", 2.0)
MUSTER_MAX_RESERVATIONS = env_int("MUSTER_MAX_RESERVATIONS", 256)
# How many waiting jobs without a reservation each cycle plans forward for an estimated start.
MUSTER_PLAN_JOBS = env_int("MUSTER_PLAN_JOBS", 500)
# The last bytes of each rank's output kept when its gang is torn down, the failed tries before a teardown goes
# on without them, and how long one `logs?follow=true` stream lasts before the client reconnects.
MUSTER_LOG_CAPTURE_BYTES = env_int("MUSTER_LOG_CAPTURE_BYTES", 2 * 1024 * 1024)
MUSTER_LOG_CAPTURE_TRIES = env_int("MUSTER_LOG_CAPTURE_TRIES", 3)
MUSTER_LOG_FOLLOW_SECONDS = env_int("MUSTER_LOG_FOLLOW_SECONDS", 600)
# The most elements one array submit may create (`POST /api/v1/jobs/array/`, `muster submit --array`).
MUSTER_MAX_ARRAY_SIZE = env_int("MUSTER_MAX_ARRAY_SIZE", 1000)
# How long a submit's Idempotency-Key is remembered: a retry within it gets the same jobs.
MUSTER_IDEMPOTENCY_KEY_SECONDS = env_int("MUSTER_IDEMPOTENCY_KEY_SECONDS", 24 * 3600)
MUSTER_PREEMPTION = env_bool("MUSTER_PREEMPTION", True)
# Jobs younger than this are not preempted (anti-thrash); preempted jobs get this long to checkpoint.
MUSTER_PREEMPTION_MIN_RUNTIME_SECONDS = env_float("MUSTER_PREEMPTION_MIN_RUNTIME_SECONDS", 600)
MUSTER_PREEMPTION_GRACE_SECONDS = env_int("MUSTER_PREEMPTION_GRACE_SECONDS", 30)
# A job is preempted at most this many times; a preempted job may not borrow beyond its quota again for this long.
MUSTER_MAX_PREEMPTIONS = env_int("MUSTER_MAX_PREEMPTIONS", 3)
# The bound for preemption for fair share alone (unset: the same): with jobs that checkpoint, a site may allow more.
MUSTER_MAX_FAIR_SHARE_PREEMPTIONS = env_int("MUSTER_MAX_FAIR_SHARE_PREEMPTIONS", MUSTER_MAX_PREEMPTIONS)
for _name in ("MUSTER_MAX_PREEMPTIONS", "MUSTER_MAX_FAIR_SHARE_PREEMPTIONS"):
    if globals()[_name] < 0:
        raise ImproperlyConfigured(f"{_name} must be 0 or more (how often a job may be preempted)")
MUSTER_REBORROW_HYSTERESIS_SECONDS = env_float("MUSTER_REBORROW_HYSTERESIS_SECONDS", 3600)
# A job is preempted only while the work it would lose is at most this times what it has left by its wall time.
MUSTER_PREEMPTION_MAX_LOST_RATIO = env_float("MUSTER_PREEMPTION_MAX_LOST_RATIO", 0.5)
# How long after it was queued a job that could preempt may wait for victims that lose less work (0: never).
MUSTER_PREEMPTION_DEFER_SECONDS = env_float("MUSTER_PREEMPTION_DEFER_SECONDS", 600)
if MUSTER_PREEMPTION_DEFER_SECONDS < 0:
    raise ImproperlyConfigured("MUSTER_PREEMPTION_DEFER_SECONDS must be 0 or more (seconds; 0 turns the wait off)")
# Preemption for fair share (docs/scheduling.md): off by default; the gap is in shares of the cluster (U/S).
MUSTER_FAIR_SHARE_PREEMPTION = env_bool("MUSTER_FAIR_SHARE_PREEMPTION", False)
MUSTER_FAIR_SHARE_PREEMPTION_GAP = env_float("MUSTER_FAIR_SHARE_PREEMPTION_GAP", 1.0)
if MUSTER_FAIR_SHARE_PREEMPTION_GAP < 0:
    raise ImproperlyConfigured("MUSTER_FAIR_SHARE_PREEMPTION_GAP must be 0 or more (shares of the cluster)")

# --- Kubernetes backend (MUSTER_CLUSTER=kubernetes) -------------------------------------------


def env_mapping(name: str) -> dict[str, str]:
    """`a=1,b=2` -> {"a": "1", "b": "2"}: resource names and annotations from one variable."""
    pairs = [p.strip() for p in os.environ.get(name, "").split(",") if p.strip()]
    if any("=" not in p for p in pairs):
        raise ImproperlyConfigured(f"{name} must be comma-separated key=value pairs")
    return dict(p.split("=", 1) for p in pairs)


# Path to a kubeconfig; empty means the in-cluster service account.
MUSTER_K8S_KUBECONFIG = os.environ.get("MUSTER_K8S_KUBECONFIG", os.environ.get("KUBECONFIG", ""))
MUSTER_K8S_NAMESPACE = os.environ.get("MUSTER_K8S_NAMESPACE", "muster-jobs")
MUSTER_K8S_GPU_RESOURCE = os.environ.get("MUSTER_K8S_GPU_RESOURCE", "nvidia.com/gpu")
MUSTER_K8S_RACK_LABEL = os.environ.get("MUSTER_K8S_RACK_LABEL", "topology.kubernetes.io/zone")
# The node label of the topology level above the rack (a leaf or spine switch's block); empty: none.
MUSTER_K8S_BLOCK_LABEL = os.environ.get("MUSTER_K8S_BLOCK_LABEL", "")
# The extended resource a node's RDMA/SR-IOV devices are advertised as (e.g. "rdma/rdma_shared_device_a",
# "nvidia.com/hostdev"): read from each node's allocatable and asked per pod by jobs' rdma_per_node. Empty: none.
MUSTER_K8S_RDMA_RESOURCE = os.environ.get("MUSTER_K8S_RDMA_RESOURCE", "")
MUSTER_K8S_GPU_MODEL_LABEL = os.environ.get("MUSTER_K8S_GPU_MODEL_LABEL", "nvidia.com/gpu.product")
# GPU sharing (docs/gpu-sharing.md). The resource the NVIDIA device plugin offers time-slicing or MPS replicas as when
# it renames them (renameByDefault); without renaming, replicas are MUSTER_K8S_GPU_RESOURCE on a node whose
# nvidia.com/gpu.sharing-strategy label says so. MIG instances are the resources named by this prefix and a profile.
MUSTER_K8S_SHARED_GPU_RESOURCE = os.environ.get("MUSTER_K8S_SHARED_GPU_RESOURCE", "nvidia.com/gpu.shared")
MUSTER_K8S_MIG_RESOURCE_PREFIX = os.environ.get("MUSTER_K8S_MIG_RESOURCE_PREFIX", "nvidia.com/mig-")
MUSTER_K8S_CPU_PER_GPU = os.environ.get("MUSTER_K8S_CPU_PER_GPU", "8")
MUSTER_K8S_MEMORY_PER_GPU = os.environ.get("MUSTER_K8S_MEMORY_PER_GPU", "64Gi")
MUSTER_K8S_SHM_SIZE = os.environ.get("MUSTER_K8S_SHM_SIZE", "32Gi")
MUSTER_K8S_MASTER_PORT = env_int("MUSTER_K8S_MASTER_PORT", 29500)
MUSTER_K8S_TERMINATION_GRACE_SECONDS = env_int("MUSTER_K8S_TERMINATION_GRACE_SECONDS", 30)
# e.g. "rdma/hca_shared_devices_a=1" (RDMA) or an SR-IOV VF resource, added to every pod's requests.
MUSTER_K8S_EXTRA_RESOURCES = env_mapping("MUSTER_K8S_EXTRA_RESOURCES")
# e.g. "k8s.v1.cni.cncf.io/networks=roce-net" for a multus secondary network.
MUSTER_K8S_POD_ANNOTATIONS = env_mapping("MUSTER_K8S_POD_ANNOTATIONS")
# Muster's priority classes as Kubernetes PriorityClasses (`production=gpu-production,normal=gpu-normal`): each job's
# pods get its class's priorityClassName, so a cluster shared with other workloads does not let kube-scheduler preempt
# a production gang for any pod of a priority above 0. A class left out runs at the cluster's default priority.
MUSTER_K8S_PRIORITY_CLASSES = env_mapping("MUSTER_K8S_PRIORITY_CLASSES")
_k8s_classes = [p.split("=", 1)[0].strip() for p in os.environ.get("MUSTER_K8S_PRIORITY_CLASSES", "").split(",") if p.strip()]
if len(_k8s_classes) != len(set(_k8s_classes)):
    raise ImproperlyConfigured("MUSTER_K8S_PRIORITY_CLASSES names a class twice: give each class one PriorityClass")
if bad := [n for n in MUSTER_K8S_PRIORITY_CLASSES.values() if not re.fullmatch(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?", n)]:
    raise ImproperlyConfigured(
        f"MUSTER_K8S_PRIORITY_CLASSES: {', '.join(bad)} is not a PriorityClass name (lower case letters, digits, '-' and '.')"
    )
if unknown := sorted(set(MUSTER_K8S_PRIORITY_CLASSES) - set(MUSTER_PRIORITY_CLASSES)):
    raise ImproperlyConfigured(
        f"MUSTER_K8S_PRIORITY_CLASSES: {', '.join(unknown)} is not a class of MUSTER_PRIORITY_CLASSES "
        f"({', '.join(MUSTER_PRIORITY_CLASSES)})"
    )
MUSTER_K8S_IMAGE_PULL_SECRET = os.environ.get("MUSTER_K8S_IMAGE_PULL_SECRET", "")
MUSTER_K8S_SERVICE_ACCOUNT = os.environ.get("MUSTER_K8S_SERVICE_ACCOUNT", "")
# Count the GPUs pods Muster did not start hold on its nodes (reads pods in every namespace; platform/kubernetes/rbac.yaml).
MUSTER_K8S_COUNT_FOREIGN_PODS = env_bool("MUSTER_K8S_COUNT_FOREIGN_PODS", True)
# ... read at most this often per worker process: each read lists every bound pod in the cluster.
MUSTER_K8S_FOREIGN_PODS_SECONDS = env_float("MUSTER_K8S_FOREIGN_PODS_SECONDS", 30.0)
MUSTER_K8S_REQUEST_TIMEOUT_SECONDS = env_float("MUSTER_K8S_REQUEST_TIMEOUT_SECONDS", 10.0)
# The uid (and gid, fsGroup) of job pods, which run as non-root on a read-only root filesystem unless their team
# is allowed otherwise (Team.allow_run_as_root, Team.allow_writable_root_filesystem in Django admin).
MUSTER_K8S_RUN_AS_USER = env_int("MUSTER_K8S_RUN_AS_USER", 1000)
if MUSTER_K8S_RUN_AS_USER < 1:
    raise ImproperlyConfigured("MUSTER_K8S_RUN_AS_USER must be a uid of 1 or more (0 is root)")
# How a gang is made (jobs/cluster/crd_manifests.py): `pods` (any cluster), `workload` (plus Kubernetes' own gang
# PodGroup, scheduling.k8s.io/v1alpha2; needs 1.36+ with the GenericWorkload and GangScheduling feature gates),
# `podgroup` (plus a scheduler-plugins coscheduling PodGroup; needs its CRD and scheduler) or `mpijob` (one Kubeflow
# MPIJob v2beta1; needs the MPI operator).
MUSTER_K8S_LAUNCH_MODE = os.environ.get("MUSTER_K8S_LAUNCH_MODE", "pods").strip() or "pods"
if MUSTER_K8S_LAUNCH_MODE not in {"pods", "workload", "podgroup", "mpijob"}:
    raise ImproperlyConfigured(f"MUSTER_K8S_LAUNCH_MODE must be 'pods', 'workload', 'podgroup' or 'mpijob', got {MUSTER_K8S_LAUNCH_MODE!r}")
# spec.schedulerName of Muster's pods; set but empty means the default scheduler. Unset, podgroup mode uses the
# scheduler-plugins Helm chart's second scheduler.
MUSTER_K8S_SCHEDULER_NAME = os.environ.get(
    "MUSTER_K8S_SCHEDULER_NAME", "scheduler-plugins-scheduler" if MUSTER_K8S_LAUNCH_MODE == "podgroup" else ""
).strip()
# PodGroup spec.scheduleTimeoutSeconds (podgroup mode); 0 leaves it out (the coscheduling plugin's default).
MUSTER_K8S_PODGROUP_SCHEDULE_TIMEOUT_SECONDS = env_int("MUSTER_K8S_PODGROUP_SCHEDULE_TIMEOUT_SECONDS", 0)
# What an MPIJob's launcher (mpirun; no GPU) requests (mpijob mode).
MUSTER_K8S_MPI_LAUNCHER_CPU = os.environ.get("MUSTER_K8S_MPI_LAUNCHER_CPU", "1")
MUSTER_K8S_MPI_LAUNCHER_MEMORY = os.environ.get("MUSTER_K8S_MPI_LAUNCHER_MEMORY", "2Gi")

# --- Telemetry (telemetry/; docs/architecture.md, "Telemetry") -------------------------------------
# Where per-job GPU and network series come from: `simulated` (built in) or `prometheus` (DCGM/node exporter series).
MUSTER_TELEMETRY_SOURCE = os.environ.get("MUSTER_TELEMETRY_SOURCE", "simulated")
if MUSTER_TELEMETRY_SOURCE not in {"simulated", "prometheus"}:
    raise ImproperlyConfigured(f"MUSTER_TELEMETRY_SOURCE must be 'simulated' or 'prometheus', got {MUSTER_TELEMETRY_SOURCE!r}")
# Renames of the catalogue's source series (telemetry/catalogue.py), e.g. "gpu_util=DCGM_FI_DEV_GPU_UTIL".
MUSTER_TELEMETRY_METRIC_NAMES = env_mapping("MUSTER_TELEMETRY_METRIC_NAMES")
MUSTER_TELEMETRY_PROMETHEUS_URL = os.environ.get("MUSTER_TELEMETRY_PROMETHEUS_URL", "")
MUSTER_TELEMETRY_SCRAPE_SECONDS = env_int("MUSTER_TELEMETRY_SCRAPE_SECONDS", 30)
# A Prometheus behind authentication: a bearer token, or basic auth (files, read at each request);
# an https one with a private CA: that CA's bundle.
MUSTER_TELEMETRY_PROMETHEUS_BEARER_TOKEN_FILE = os.environ.get("MUSTER_TELEMETRY_PROMETHEUS_BEARER_TOKEN_FILE", "")
MUSTER_TELEMETRY_PROMETHEUS_USERNAME = os.environ.get("MUSTER_TELEMETRY_PROMETHEUS_USERNAME", "")
MUSTER_TELEMETRY_PROMETHEUS_PASSWORD_FILE = os.environ.get("MUSTER_TELEMETRY_PROMETHEUS_PASSWORD_FILE", "")
MUSTER_TELEMETRY_PROMETHEUS_CA_FILE = os.environ.get("MUSTER_TELEMETRY_PROMETHEUS_CA_FILE", "")
# How long one Prometheus query may take before the source is reported unavailable.
MUSTER_TELEMETRY_PROMETHEUS_TIMEOUT_SECONDS = env_float("MUSTER_TELEMETRY_PROMETHEUS_TIMEOUT_SECONDS", 10.0)
# The DCGM exporter renamed its host label; both spellings are accepted.
MUSTER_TELEMETRY_HOSTNAME_LABELS = [s.strip() for s in os.environ.get("MUSTER_TELEMETRY_HOSTNAME_LABELS", "Hostname,hostname").split(",")]
# The label of node exporter's series that holds the Kubernetes node name.
MUSTER_TELEMETRY_NODE_LABEL = os.environ.get("MUSTER_TELEMETRY_NODE_LABEL", "instance")
# PromQL per (metric scope, level read), one query per aggregation of a bucket's samples. Placeholders: name, over
# (sum|min|max|count: the mean is sum / count), rollup (how that aggregation combines series: sum|min|max|sum), by
# (the level's grouping labels: pod, gpu and the host labels; node_label; none for the job), namespace, pods and nodes
# (regexes), node_label, window (the bucket, e.g. 59999ms), resolution (scrape seconds), rate_window (seconds), step.
# MUSTER_TELEMETRY_PROMQL (a JSON object) replaces any of them.
_POD_SERIES = '{name}{{namespace="{namespace}",pod=~"{pods}"}}'
_NODE_RATE = 'sum by ({node_label}) (rate({name}{{{node_label}=~"{nodes}"}}[{rate_window}s]))'
_POD_BUCKET = "{rollup} by ({by}) ({over}_over_time(" + _POD_SERIES + "[{window}]))"
_NODE_BUCKET = "{rollup} by ({by}) ({over}_over_time(" + _NODE_RATE + "[{window}:{resolution}s]))"
MUSTER_TELEMETRY_PROMQL = {
    "gpu_gpu": _POD_BUCKET,
    "gpu_node": _POD_BUCKET,
    "gpu_job": _POD_BUCKET,
    "node_node": _NODE_BUCKET,
    "node_job": _NODE_BUCKET,
    "job_job": _POD_BUCKET,
}
try:
    MUSTER_TELEMETRY_PROMQL.update(json.loads(os.environ.get("MUSTER_TELEMETRY_PROMQL", "") or "{}"))
except (ValueError, TypeError) as _exc:
    raise ImproperlyConfigured("MUSTER_TELEMETRY_PROMQL must be a JSON object of PromQL templates") from _exc
# The simulated source samples every this many seconds (twice per bucket when buckets are longer).
MUSTER_TELEMETRY_SIM_INTERVAL_SECONDS = env_int("MUSTER_TELEMETRY_SIM_INTERVAL_SECONDS", 5)
# The page of a running job redraws its charts, flags and logs in place this often (seconds).
MUSTER_LIVE_REFRESH_SECONDS = max(1, env_int("MUSTER_LIVE_REFRESH_SECONDS", 10))
# How often the dashboard (/dashboard/) redraws its numbers and charts in place.
MUSTER_DASHBOARD_REFRESH_SECONDS = max(1, env_int("MUSTER_DASHBOARD_REFRESH_SECONDS", 60))
# Charts: at most this many points per line trace, and time columns in the nodes x GPUs heatmap.
MUSTER_TELEMETRY_MAX_POINTS = env_int("MUSTER_TELEMETRY_MAX_POINTS", 2000)
MUSTER_TELEMETRY_HEATMAP_COLUMNS = env_int("MUSTER_TELEMETRY_HEATMAP_COLUMNS", 360)
# The metrics API refuses to return more buckets per series than this.
MUSTER_TELEMETRY_API_MAX_POINTS = env_int("MUSTER_TELEMETRY_API_MAX_POINTS", 11000)
# A finished run is stored in at most this many buckets per series: 1-minute buckets for a 24-hour run.
MUSTER_TELEMETRY_STORE_BUCKETS = env_int("MUSTER_TELEMETRY_STORE_BUCKETS", 1440)
# Pushes of NCCL results (POST /api/v1/jobs/{id}/telemetry/): bounds per request and per job.
MUSTER_TELEMETRY_PUSH_MAX_BYTES = min(env_int("MUSTER_TELEMETRY_PUSH_MAX_BYTES", 256 * 1024), DATA_UPLOAD_MAX_MEMORY_SIZE)
MUSTER_TELEMETRY_PUSH_MAX_RECORDS = env_int("MUSTER_TELEMETRY_PUSH_MAX_RECORDS", 500)
MUSTER_TELEMETRY_PUSHES_PER_MINUTE = env_int("MUSTER_TELEMETRY_PUSHES_PER_MINUTE", 30)
MUSTER_TELEMETRY_MAX_SAMPLES_PER_JOB = env_int("MUSTER_TELEMETRY_MAX_SAMPLES_PER_JOB", 100_000)
# Pods flush their last results as they stop: pushes are accepted this long after a job ends.
MUSTER_TELEMETRY_PUSH_GRACE_SECONDS = env_int("MUSTER_TELEMETRY_PUSH_GRACE_SECONDS", 600)
# Where pods reach Muster, for MUSTER_TELEMETRY_URL in their environment (e.g. http://muster-web.muster:8000).
MUSTER_PUBLIC_URL = os.environ.get("MUSTER_PUBLIC_URL", "").rstrip("/")
# A finished run whose store task has not stored it this long after it ended is enqueued again by a sweep every
# MUSTER_TELEMETRY_STORE_SWEEP_SECONDS, waiting twice as long after each try, up to MUSTER_TELEMETRY_STORE_MAX_TRIES.
MUSTER_TELEMETRY_STORE_RETRY_SECONDS = env_int("MUSTER_TELEMETRY_STORE_RETRY_SECONDS", 120)
MUSTER_TELEMETRY_STORE_SWEEP_SECONDS = env_int("MUSTER_TELEMETRY_STORE_SWEEP_SECONDS", 60)
MUSTER_TELEMETRY_STORE_MAX_TRIES = env_int("MUSTER_TELEMETRY_STORE_MAX_TRIES", 12)
# Efficiency flags: a GPU below this utilisation for this long is idle; jobs of at least this many GPUs should use tensor cores.
MUSTER_TELEMETRY_IDLE_PERCENT = env_float("MUSTER_TELEMETRY_IDLE_PERCENT", 5.0)
MUSTER_TELEMETRY_IDLE_SECONDS = env_int("MUSTER_TELEMETRY_IDLE_SECONDS", 600)
MUSTER_TELEMETRY_LARGE_JOB_GPUS = env_int("MUSTER_TELEMETRY_LARGE_JOB_GPUS", 8)

# --- /metrics (Prometheus) and the dashboard (telemetry/exporter.py, telemetry/dashboard/figures.py) ---------------------
# Bearer token Prometheus sends to /metrics (`authorization: {credentials: ...}` in its scrape config).
# Empty: /metrics answers requests from loopback only (e.g. a sidecar or a node-local Prometheus).
MUSTER_METRICS_TOKEN = os.environ.get("MUSTER_METRICS_TOKEN", "").strip()

# Notifications (docs/notifications.md): a job's owner is told when it starts, ends or fails, by e-mail through
# Django's mail settings (the console by default: set EMAIL_BACKEND and EMAIL_HOST for real mail) or a webhook.
EMAIL_BACKEND = os.environ.get("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
EMAIL_HOST = os.environ.get("EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("EMAIL_PORT", 25)
EMAIL_HOST_USER = os.environ.get("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = os.environ.get("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL", "muster@localhost")
# The site's address, for the job links in messages (e.g. https://muster.example); empty: a path only.
MUSTER_BASE_URL = os.environ.get("MUSTER_BASE_URL", "")
# A message that cannot be sent is tried again after this, doubling each time, this many times in all.
MUSTER_NOTIFY_RETRY_SECONDS = env_int("MUSTER_NOTIFY_RETRY_SECONDS", 60)
MUSTER_NOTIFY_MAX_TRIES = env_int("MUSTER_NOTIFY_MAX_TRIES", 6)
MUSTER_NOTIFY_WEBHOOK_TIMEOUT_SECONDS = env_float("MUSTER_NOTIFY_WEBHOOK_TIMEOUT_SECONDS", 5.0)
MUSTER_NOTIFY_SWEEP_SECONDS = env_float("MUSTER_NOTIFY_SWEEP_SECONDS", 60.0)
# Webhooks go to public addresses only: a user's webhook at a loopback, private or link-local address (the cloud's
# metadata service, an internal admin port) would have Muster's worker POST inside the site's network. Networks an
# admin trusts (comma-separated CIDRs, e.g. 10.20.0.0/16 for an internal chat relay) are allowed too.
MUSTER_NOTIFY_WEBHOOK_ALLOWED_NETWORKS = [
    n.strip() for n in os.environ.get("MUSTER_NOTIFY_WEBHOOK_ALLOWED_NETWORKS", "").split(",") if n.strip()
]
