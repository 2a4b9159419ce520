"""Django settings for the gateway.

This is the only module that reads the environment. Every value goes through a small typed helper that
fails loudly, naming the variable, when the value cannot be used; application code reads
``django.conf.settings``.
"""

from __future__ import annotations

import json
import os
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlparse

from django.core.exceptions import ImproperlyConfigured

from routing.clients.http1.proxy import parse_proxy_url
from routing.clients.redis_url import parse_redis_url
from routing.config.otel_settings import OtelSettingError, tracing_config
from routing.config.webhook_url import webhook_url_problem
from routing.core.budget_alerts import parse_thresholds
from routing.core.durations import parse_duration
from routing.core.key_references import parse_allow_list

BASE_DIR = Path(__file__).resolve().parent.parent  # the checkout, or site-packages when the gateway is installed
# The folder a relative ``sqlite:///`` path is relative to and where var/ (the default SQLite file, collected static
# files, the audit spool, beat's schedule) is written: the checkout when run from one (manage.py beside the
# packages), else the working directory, since an installed gateway must not write into site-packages.
RUN_DIR = BASE_DIR if (BASE_DIR / "manage.py").is_file() else Path.cwd()
VAR_DIR = RUN_DIR / "var"

# --------------------------------------------------------------------------------------------------------
# Typed helpers
# --------------------------------------------------------------------------------------------------------

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}

# Every variable this module reads, filled in as the helpers below run: a provider key reference may not name
# one of them (see "Provider key references" below), and no second list has to be kept in step by hand.
_ENV_NAMES_READ: set[str] = set()


def _environ(name: str) -> str | None:
    """The variable's raw value (None when unset), remembered as one of the gateway's own settings."""
    _ENV_NAMES_READ.add(name)
    return os.environ.get(name)


def env_str(name: str, default: str = "") -> str:
    """The variable's value, or the content of the file named by ``NAME_FILE``, or ``default``."""
    file_name = _environ(f"{name}_FILE")
    if file_name:
        try:
            return Path(file_name).read_text().strip()
        except OSError as exc:
            raise ImproperlyConfigured(f"{name}_FILE: cannot read {file_name!r}: {exc.strerror}") from None
    value = _environ(name)
    return default if value is None else value


def env_bool(name: str, default: bool) -> bool:
    raw = _environ(name)
    if raw is None or raw.strip() == "":
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}: expected true or false, got {raw!r}")


def env_int(name: str, default: int, *, minimum: int | None = None, maximum: int | None = None) -> int:
    raw = _environ(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise ImproperlyConfigured(f"{name}: expected an integer, got {raw!r}") from None
    _check_range(name, value, minimum, maximum)
    return value


def env_float(name: str, default: float, *, minimum: float | None = None, maximum: float | None = None) -> float:
    raw = _environ(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = float(raw.strip())
    except ValueError:
        raise ImproperlyConfigured(f"{name}: expected a number, got {raw!r}") from None
    if value != value:  # NaN
        raise ImproperlyConfigured(f"{name}: expected a number, got {raw!r}")
    _check_range(name, value, minimum, maximum)
    return value


def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    raw = _environ(name)
    if raw is None or raw.strip() == "":
        return default
    value = raw.strip().lower()
    if value not in choices:
        raise ImproperlyConfigured(f"{name}: expected one of {', '.join(choices)}, got {raw!r}")
    return value


def env_duration(name: str, default: str, *, minimum: float = 0.0) -> float:
    raw = _environ(name)
    text = default if raw is None or raw.strip() == "" else raw
    seconds = parse_duration(text)
    if seconds is None:
        raise ImproperlyConfigured(f"{name}: expected a duration such as 30s, 5m or 1h, got {raw!r}")
    if seconds < minimum:
        raise ImproperlyConfigured(f"{name}: must be at least {minimum:g}s, got {raw!r}")
    return seconds


def env_json(name: str, default: Any) -> Any:
    raw = _environ(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ImproperlyConfigured(f"{name}: invalid JSON ({exc.msg} at position {exc.pos})") from None


def env_list(name: str, default: list[str]) -> list[str]:
    raw = _environ(name)
    if raw is None or raw.strip() == "":
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_proxy(name: str) -> str:
    """A proxy URL from ``NAME`` (or its lower-case form, as curl and Go read it), checked; empty when unset."""
    value = env_str(name) or env_str(name.lower())
    if value:
        try:
            parse_proxy_url(value)
        except ValueError as exc:
            raise ImproperlyConfigured(f"{name}: {exc}") from None  # never the URL: it may hold a password
    return value


def provider_secret(variable: str) -> str | None:
    """A provider key: the variable's value, or when it is unset, the content of the file ``NAME_FILE`` names.

    Provider keys are referenced as ``${OPENAI_API_KEY}`` in the configuration and read here when the routing
    table is compiled (at start-up and on every configuration reload, never per request), so a key rotated in
    the environment or in its file takes effect on the next reload without touching the database. The file
    form is how container secrets are mounted; its content is stripped of surrounding white space. None when
    neither gives a value; ImproperlyConfigured naming ``NAME_FILE`` and the path, never the content, when the
    file cannot be read. Whether ``variable`` may hold a provider key at all is decided before this is called
    (routing.config.provider_keys); these names are not the gateway's settings, so they are not recorded.
    """
    value = os.environ.get(variable)
    if value:
        return value
    file_name = os.environ.get(f"{variable}_FILE")
    if not file_name:
        return None
    try:
        content = Path(file_name).read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise ImproperlyConfigured(f"{variable}_FILE: cannot read {file_name!r}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ImproperlyConfigured(f"{variable}_FILE: {file_name!r} is not UTF-8 text") from None
    return content or None


def _check_range(name: str, value: float, minimum: float | None, maximum: float | None) -> None:
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name}: must be at least {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ImproperlyConfigured(f"{name}: must be at most {maximum}, got {value}")


def database_from_url(name: str, url: str) -> dict[str, Any]:
    """A Django DATABASES entry from ``sqlite:///path`` or ``postgres://user:pass@host:port/db``."""
    parsed = urlparse(url)
    if parsed.scheme == "sqlite":
        path = unquote(parsed.path)
        if path.startswith("/") and url.startswith("sqlite:///") and not url.startswith("sqlite:////"):
            path = path[1:]  # sqlite:///relative.db is relative to RUN_DIR
        return {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": str(RUN_DIR / path) if not Path(path).is_absolute() else path,
            # The demo's admin and audit writer share the file; wait instead of failing with "locked".
            "OPTIONS": {"timeout": 20, "transaction_mode": "IMMEDIATE", "init_command": "PRAGMA journal_mode=WAL;"},
        }
    if parsed.scheme in {"postgres", "postgresql", "psql"}:
        options: dict[str, Any] = dict(parse_qsl(parsed.query))
        pool_max = int(options.pop("pool_max", "8"))
        pool_min = int(options.pop("pool_min", "1"))
        options["pool"] = {"min_size": pool_min, "max_size": pool_max, "timeout": 10}
        options.setdefault("connect_timeout", "5")
        return {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": unquote(parsed.path.lstrip("/")) or "postgres",
            "USER": unquote(parsed.username or ""),
            "PASSWORD": unquote(parsed.password or ""),
            "HOST": parsed.hostname or "",
            "PORT": str(parsed.port or ""),
            "OPTIONS": options,
            "CONN_MAX_AGE": 0,  # the pool owns connection reuse
        }
    raise ImproperlyConfigured(f"{name}: unsupported database URL scheme {parsed.scheme!r} (use sqlite or postgres)")


# --------------------------------------------------------------------------------------------------------
# Django
# --------------------------------------------------------------------------------------------------------

DEBUG = env_bool("DJANGO_DEBUG", False)
# The one-machine demo (`manage.py demo` sets GOMODEL_DEMO=true) and DJANGO_DEBUG may run on a public, fixed
# secret key. Anything else is production, where a known key lets anyone forge admin sessions and signed
# values: it refuses to start without one.
GOMODEL_DEMO = env_bool("GOMODEL_DEMO", False)
# Refused at the end of this module when production has none, so that any other bad value is named first.
SECRET_KEY = env_str("DJANGO_SECRET_KEY", "") or (
    "insecure-demo-key-set-DJANGO_SECRET_KEY-in-production" if GOMODEL_DEMO or DEBUG else ""
)
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS", [])

# HTTPS for the admin and the auditor pages. The gateway speaks plain HTTP; TLS ends in front of it (a load
# balancer or reverse proxy) or in the server (granian --ssl-certificate). DJANGO_HTTPS=true says browsers reach
# it over HTTPS: the session and CSRF cookies are marked Secure, a page requested over plain HTTP is redirected
# to https://, and HSTS keeps browsers there. The API, the probes and /metrics are never redirected: a load
# balancer's health check and a client on loopback speak plain HTTP to the gateway itself, and a redirected
# POST would come back as a GET after its key had already crossed in clear. (They are served without Django's
# middleware anyway, see gomodel_site/asgi.py; the exemption keeps it so should that change.) Behind a proxy
# every request reaches Django as plain HTTP unless DJANGO_SECURE_PROXY_SSL_HEADER names the header the proxy
# sets to "https" (X-Forwarded-Proto): set it only when the proxy overwrites that header on every request.
DJANGO_HTTPS = env_bool("DJANGO_HTTPS", False)
_proxy_ssl_header = env_str("DJANGO_SECURE_PROXY_SSL_HEADER", "").strip()
if _proxy_ssl_header and not _proxy_ssl_header.replace("-", "").replace("_", "").isalnum():
    raise ImproperlyConfigured(
        f"DJANGO_SECURE_PROXY_SSL_HEADER: expected a header name such as X-Forwarded-Proto, got {_proxy_ssl_header!r}"
    )
SECURE_PROXY_SSL_HEADER = (
    ("HTTP_" + _proxy_ssl_header.upper().replace("-", "_"), "https") if _proxy_ssl_header else None
)
SECURE_SSL_REDIRECT = env_bool("DJANGO_SECURE_SSL_REDIRECT", DJANGO_HTTPS)
SECURE_REDIRECT_EXEMPT = [r"^v1/", r"^health(/|$)", r"^metrics/?$"]
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = env_bool("DJANGO_SECURE_COOKIES", DJANGO_HTTPS)
SECURE_HSTS_SECONDS = env_int("DJANGO_HSTS_SECONDS", 31_536_000 if DJANGO_HTTPS else 0, minimum=0)
# HSTS from gateway.example.com covers *.gateway.example.com only, not example.com's other hosts.
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("DJANGO_HSTS_INCLUDE_SUBDOMAINS", DJANGO_HTTPS)
# Consent to browsers' built-in HSTS lists: the operator's decision, never a default.
SECURE_HSTS_PRELOAD = env_bool("DJANGO_HSTS_PRELOAD", False)

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_prometheus",
    "axes",
    "routing",
    "audit",
]

# These apply to the admin and auditor pages only. The proxy endpoints are served by a handler without
# middleware (see gomodel_site/asgi.py): every sync middleware costs a thread hop per request.
MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "axes.middleware.AxesMiddleware",  # last, as django-axes requires: turns a lockout into its page
]

ROOT_URLCONF = "gomodel_site.urls"
ASGI_APPLICATION = "gomodel_site.asgi.application"
WSGI_APPLICATION = "gomodel_site.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        # Inside the package, so an installed wheel carries them; listed before the apps' own, so the admin's
        # templates (admin/base_site.html, the dashboard) replace Django's.
        "DIRS": [Path(__file__).resolve().parent / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASE_URL = env_str("DATABASE_URL", "sqlite:///var/gomodel.sqlite3")
DATABASES = {"default": database_from_url("DATABASE_URL", DATABASE_URL)}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Admin and auditor-page login (one login page, the admin's): django-axes counts failures per user name and
# client address in the database, and refuses that pair for GOMODEL_ADMIN_LOCKOUT after
# GOMODEL_ADMIN_LOGIN_FAILURES failures in a row; a successful login before the limit starts the count again.
# Every failure is kept (AccessFailureLog, in the admin). The client address is the TCP peer: a forwarded
# header is believed only when GOMODEL_TRUSTED_PROXIES says how many proxies in front of the gateway append to
# X-Forwarded-For (gomodel_site/client_address.py).
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
GOMODEL_ADMIN_LOGIN_FAILURES = env_int("GOMODEL_ADMIN_LOGIN_FAILURES", 5, minimum=1, maximum=1000)
GOMODEL_ADMIN_LOCKOUT = env_duration("GOMODEL_ADMIN_LOCKOUT", "15m", minimum=1)
GOMODEL_TRUSTED_PROXIES = env_int("GOMODEL_TRUSTED_PROXIES", 0, minimum=0, maximum=10)
AXES_HANDLER = "axes.handlers.database.AxesDatabaseHandler"
AXES_FAILURE_LIMIT = GOMODEL_ADMIN_LOGIN_FAILURES
AXES_COOLOFF_TIME = timedelta(seconds=GOMODEL_ADMIN_LOCKOUT)
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_ENABLE_ACCESS_FAILURE_LOG = True
AXES_CLIENT_IP_CALLABLE = "gomodel_site.client_address.client_address"
AXES_LOCKOUT_CALLABLE = "gomodel_site.login_lockout.lockout_response"
AXES_VERBOSE = False  # its start-up banner on every worker process says nothing an operator needs

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

# Static files: the admin's and the auditor pages' CSS and JavaScript, served by the application itself
# (ServeStatic, see gomodel_site/static_files.py), so the pages are styled with no reverse proxy in front.
# `manage.py collectstatic` (the demo runs it) writes every file under a content-hashed name with gzip and
# Brotli variants beside it; hashed names are served as cacheable forever, since a change means a new name.
STATIC_URL = "static/"
STATIC_ROOT = Path(env_str("DJANGO_STATIC_ROOT", str(VAR_DIR / "static")))
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "servestatic.storage.CompressedManifestStaticFilesStorage"},
}

REST_FRAMEWORK = {
    "UNAUTHENTICATED_USER": None,
    "DEFAULT_AUTHENTICATION_CLASSES": [],
    "DEFAULT_PERMISSION_CLASSES": [],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.JSONParser"],
}

# --------------------------------------------------------------------------------------------------------
# Gateway
# --------------------------------------------------------------------------------------------------------

GOMODEL_MASTER_KEY = env_str("GOMODEL_MASTER_KEY", "")
# Who may call /v1. `keys` (the default): a valid gateway key on every request, also while none exists (then
# every request is a 401 saying how to create one). `open`: a request without a valid key is served too when
# its TCP peer is on loopback and it carries no forwarding header (the demo, local experiments); a valid key
# still brings its model list. Only this setting decides: revoking the last key never opens the gateway.
GOMODEL_AUTH = env_choice("GOMODEL_AUTH", "keys", ("keys", "open"))
GOMODEL_CONFIG = env_str("GOMODEL_CONFIG", "")

# Provider key references (${NAME}): which variables a provider key may be read from (routing/core/
# key_references.py says why). Reserved whatever the allow-list says:
# - every variable this module reads: the set below keeps filling as the rest of this file runs, so a setting
#   added anywhere in it is covered;
# - the gateway's own name spaces (DJANGO_, GOMODEL_, PRO_, AUDIT_, CELERY_), settings that do not exist yet
#   included;
# - what the infrastructure's own clients read from this environment (libpq's PG*, POSTGRES*, DATABASE_*,
#   REDIS_*, AMQP_*, RABBITMQ_*, proxies, CA bundles, error reporting) and credential names that are never an LLM
#   provider's API key (passwords, secret keys, cloud client secrets, workload identity tokens).
# A reference ${NAME} is refused when NAME or NAME_FILE is reserved: its value may be read from NAME_FILE.
# Compared without regard to case. GOMODEL_PROVIDER_KEY_ENV_ALLOW narrows the rest to a comma-separated list
# of names and prefix patterns (`OPENAI_*, ANTHROPIC_API_KEY`); unset: any name that is not reserved.
try:
    GOMODEL_PROVIDER_KEY_ENV_ALLOW = parse_allow_list(env_list("GOMODEL_PROVIDER_KEY_ENV_ALLOW", []))
except ValueError as exc:
    raise ImproperlyConfigured(f"GOMODEL_PROVIDER_KEY_ENV_ALLOW: {exc}") from None
_ENV_NAMES_READ.update({
    "SECRET_KEY", "PASSWORD", "DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "BROKER_URL", "SENTRY_DSN",
    "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE",
    "AWS_SESSION_TOKEN",
})
# Workload identity: the token (or the path of the token file) a pod or task presents to its cloud, which would
# let whoever receives it act as the gateway's own identity there. Each with its _FILE form; for the first three
# the _FILE form is the variable the platforms actually set.
_WORKLOAD_IDENTITY = ("AWS_WEB_IDENTITY_TOKEN", "AZURE_FEDERATED_TOKEN", "AWS_CONTAINER_AUTHORIZATION_TOKEN",
                      "GOOGLE_APPLICATION_CREDENTIALS")
_ENV_NAMES_READ.update({*_WORKLOAD_IDENTITY, *(f"{name}_FILE" for name in _WORKLOAD_IDENTITY)})
PROVIDER_KEY_ENV_RESERVED_NAMES = _ENV_NAMES_READ  # the same set: names read further down join it
PROVIDER_KEY_ENV_RESERVED_PREFIXES = (
    "DJANGO_", "GOMODEL_", "PRO_", "AUDIT_", "CELERY_", "DATABASE_", "REDIS_", "POSTGRES", "PG", "AMQP_", "RABBITMQ_",
)
PROVIDER_KEY_ENV_RESERVED_SUFFIXES = ("_SECRET_KEY", "_SECRET_ACCESS_KEY", "_CLIENT_SECRET", "_PASSWORD")
# The one reader of a provider key's variable (provider_secret above), handed to the apps as a setting: they read
# django.conf.settings and never import this module (tests/test_layers.py), whichever settings module is in use.
PROVIDER_KEY_READER = provider_secret

# How often each worker process checks whether the routing configuration changed (hot reload).
GOMODEL_CONFIG_POLL_SECONDS = env_float("GOMODEL_CONFIG_POLL_SECONDS", 1.0, minimum=0.05, maximum=60)
# Bodies are read into memory and refused while they arrive (routing/api/body_read.py): /v1 bodies past
# GOMODEL_MAX_BODY_BYTES, any other path's (the admin, the auditor pages, the probes) past Django's own
# DATA_UPLOAD_MAX_MEMORY_SIZE, kept at its 2.5 MB default; and any body still arriving GOMODEL_BODY_TIMEOUT
# after its request did.
GOMODEL_MAX_BODY_BYTES = env_int("GOMODEL_MAX_BODY_BYTES", 10 * 1024 * 1024, minimum=1024)
DATA_UPLOAD_MAX_MEMORY_SIZE = 2_621_440
# The most answers one chat request may ask for (`n`): each is generated and billed, so a larger n is a 400
# naming the field rather than a bill the key's budget sees only afterwards. OpenAI's own limit is 128.
GOMODEL_MAX_N = env_int("GOMODEL_MAX_N", 8, minimum=1, maximum=128)
GOMODEL_BODY_TIMEOUT = env_duration("GOMODEL_BODY_TIMEOUT", "30s", minimum=0.1)
GOMODEL_DEFAULT_DEADLINE_MS = env_int("GOMODEL_DEFAULT_DEADLINE_MS", 120_000, minimum=100)
GOMODEL_UPSTREAM_CONNECT_TIMEOUT = env_duration("GOMODEL_UPSTREAM_CONNECT_TIMEOUT", "5s")
GOMODEL_UPSTREAM_MAX_CONNECTIONS = env_int("GOMODEL_UPSTREAM_MAX_CONNECTIONS", 1000, minimum=1)
# Per provider origin (scheme, host, port), so a few busy providers cannot take every slot from the rest.
GOMODEL_UPSTREAM_MAX_CONNECTIONS_PER_ORIGIN = env_int("GOMODEL_UPSTREAM_MAX_CONNECTIONS_PER_ORIGIN", 100, minimum=1)
# A provider's answer, on the wire and after gzip/deflate decoding; past either it is a failed attempt.
GOMODEL_UPSTREAM_MAX_RESPONSE_BYTES = env_int("GOMODEL_UPSTREAM_MAX_RESPONSE_BYTES", 64 * 1024 * 1024,
                                              minimum=64 * 1024)
GOMODEL_UPSTREAM_MAX_DECOMPRESSED_BYTES = env_int("GOMODEL_UPSTREAM_MAX_DECOMPRESSED_BYTES", 128 * 1024 * 1024,
                                                  minimum=64 * 1024)
# The longest silence between two pieces of a provider's stream (the attempt's deadline bounds it as a whole).
GOMODEL_STREAM_IDLE_TIMEOUT = env_duration("GOMODEL_STREAM_IDLE_TIMEOUT", "5m", minimum=0.001)
# Provider traffic through an HTTP proxy (docs/providers.md): HTTPS_PROXY for https providers (a CONNECT tunnel),
# HTTP_PROXY for http ones, NO_PROXY the hosts that go direct; a provider's own `proxy` setting wins.
HTTPS_PROXY = env_proxy("HTTPS_PROXY")
HTTP_PROXY = env_proxy("HTTP_PROXY")
NO_PROXY = env_str("NO_PROXY") or env_str("no_proxy")
# Attempts per request: one primary plus GOMODEL_MAX_FALLBACKS fallbacks, and a same-route retry only for an
# early connection failure; retries and fallbacks together stay under GOMODEL_RETRY_BUDGET of all requests.
GOMODEL_MAX_ATTEMPTS = env_int("GOMODEL_MAX_ATTEMPTS", 3, minimum=1, maximum=10)
GOMODEL_MAX_FALLBACKS = env_int("GOMODEL_MAX_FALLBACKS", 1, minimum=0, maximum=9)
GOMODEL_SAME_ROUTE_RETRIES = env_int("GOMODEL_SAME_ROUTE_RETRIES", 1, minimum=0, maximum=5)
GOMODEL_RETRY_BUDGET = env_float("GOMODEL_RETRY_BUDGET", 0.2, minimum=0.0, maximum=1.0)
REDIS_URL = env_str("REDIS_URL", "")
if REDIS_URL:
    try:
        parse_redis_url(REDIS_URL)  # one Redis server, and only the URL options the gateway's client implements
    except ValueError as exc:
        raise ImproperlyConfigured(f"REDIS_URL {exc}") from None
# Where per-key and per-team limits are counted in Redis: gateways that share one Redis database but must not
# share their counts (two deployments, or test runs) give each its own prefix.
GOMODEL_LIMIT_KEY_PREFIX = env_str("GOMODEL_LIMIT_KEY_PREFIX", "gomodel:limit:")
# The output a request without max_tokens reserves per choice against a key's tpm and budget (docs/governance.md).
GOMODEL_LIMIT_DEFAULT_OUTPUT_TOKENS = env_int("GOMODEL_LIMIT_DEFAULT_OUTPUT_TOKENS", 1024, minimum=1,
                                              maximum=1_000_000)
# Budget alerts (docs/governance.md#budget-alerts): each threshold (a percentage of a key's or team's budget_usd)
# fires once per budget period: an audit row, gomodel_budget_alerts_total, and a signed POST to the team's
# alert_webhook_url or, failing that, GOMODEL_BUDGET_ALERT_WEBHOOK_URL. An empty threshold list switches them off.
try:
    GOMODEL_BUDGET_ALERT_THRESHOLDS = parse_thresholds(env_str("GOMODEL_BUDGET_ALERT_THRESHOLDS", "50,80,100"))
except ValueError as exc:
    raise ImproperlyConfigured(f"GOMODEL_BUDGET_ALERT_THRESHOLDS: {exc}") from None
GOMODEL_BUDGET_ALERT_WEBHOOK_URL = env_str("GOMODEL_BUDGET_ALERT_WEBHOOK_URL").strip()
if _problem := webhook_url_problem(GOMODEL_BUDGET_ALERT_WEBHOOK_URL):
    raise ImproperlyConfigured(f"GOMODEL_BUDGET_ALERT_WEBHOOK_URL {_problem}")  # never the URL: it may hold a token
# The HMAC-SHA256 key every alert body is signed with (X-GoModel-Signature); alerts are never posted unsigned.
GOMODEL_BUDGET_ALERT_SECRET = env_str("GOMODEL_BUDGET_ALERT_SECRET")
if GOMODEL_BUDGET_ALERT_SECRET and len(GOMODEL_BUDGET_ALERT_SECRET) < 16:
    raise ImproperlyConfigured("GOMODEL_BUDGET_ALERT_SECRET: must be at least 16 characters")
if GOMODEL_BUDGET_ALERT_WEBHOOK_URL and not GOMODEL_BUDGET_ALERT_SECRET:
    raise ImproperlyConfigured("GOMODEL_BUDGET_ALERT_SECRET: not set, and GOMODEL_BUDGET_ALERT_WEBHOOK_URL is; alerts "
                               "are signed with it (given directly or as GOMODEL_BUDGET_ALERT_SECRET_FILE)")
# Delivery: attempts after the first (each wait doubles from the base, at most 10 minutes), and each post's timeout.
GOMODEL_BUDGET_ALERT_RETRIES = env_int("GOMODEL_BUDGET_ALERT_RETRIES", 8, minimum=0, maximum=20)
GOMODEL_BUDGET_ALERT_RETRY_BASE = env_duration("GOMODEL_BUDGET_ALERT_RETRY_BASE", "10s", minimum=0.01)
GOMODEL_BUDGET_ALERT_TIMEOUT = env_duration("GOMODEL_BUDGET_ALERT_TIMEOUT", "5s", minimum=0.1)
# OpenTelemetry traces (docs/observability.md): on when an OTLP endpoint is set, from the standard OTEL_* variables;
# None when off. The headers may carry a backend's token, so they (and only they) can also come from a _FILE.
try:
    OTEL_TRACING = tracing_config(lambda name: env_str(name) if name.endswith("HEADERS") else (_environ(name) or ""))
except OtelSettingError as exc:
    raise ImproperlyConfigured(str(exc)) from None
# The response cache (docs/cache.md): the bytes its in-process store keeps at most, the largest answer it keeps (in
# either store), how long a lookup waits for Redis before it is a miss, and its key prefix in Redis.
GOMODEL_CACHE_MAX_BYTES = env_int("GOMODEL_CACHE_MAX_BYTES", 64 * 1024 * 1024, minimum=1024, maximum=64 * 1024 ** 3)
GOMODEL_CACHE_MAX_ENTRY_BYTES = env_int("GOMODEL_CACHE_MAX_ENTRY_BYTES", 1024 * 1024, minimum=1024,
                                        maximum=64 * 1024 * 1024)
GOMODEL_CACHE_REDIS_TIMEOUT = env_float("GOMODEL_CACHE_REDIS_TIMEOUT", 0.1, minimum=0.001, maximum=5.0)
GOMODEL_CACHE_KEY_PREFIX = env_str("GOMODEL_CACHE_KEY_PREFIX", "gomodel:cache:")
# Semantic matching: the most vectors one partition (scope and context) keeps, and the most partitions a process
# keeps in memory without Redis.
GOMODEL_CACHE_SEMANTIC_MAX_PER_PARTITION = env_int("GOMODEL_CACHE_SEMANTIC_MAX_PER_PARTITION", 256, minimum=1,
                                                   maximum=100_000)
GOMODEL_CACHE_SEMANTIC_MAX_PARTITIONS = env_int("GOMODEL_CACHE_SEMANTIC_MAX_PARTITIONS", 10_000, minimum=1,
                                                maximum=10_000_000)
# Set for several worker processes: prometheus_client then sums the metrics of all of them.
PROMETHEUS_MULTIPROC_DIR = env_str("PROMETHEUS_MULTIPROC_DIR", "")

# Smart tier routing (names and defaults as documented for GoModel's intelligent routing).
PRO_SMART_ROUTING_ENABLED = env_bool("PRO_SMART_ROUTING_ENABLED", True)
PRO_SMART_ROUTING_ROUTES = env_json("PRO_SMART_ROUTING_ROUTES", {})
if not isinstance(PRO_SMART_ROUTING_ROUTES, dict) or not all(
    isinstance(v, dict) and isinstance(v.get("easy"), str) and isinstance(v.get("hard"), str)
    for v in PRO_SMART_ROUTING_ROUTES.values()
):
    raise ImproperlyConfigured(
        'PRO_SMART_ROUTING_ROUTES: expected {"alias": {"easy": "model", "hard": "model"}, ...}'
    )
PRO_SMART_ROUTING_THRESHOLD = env_int("PRO_SMART_ROUTING_THRESHOLD", 4, minimum=1, maximum=100)
PRO_SMART_ROUTING_SESSION_TTL = env_duration("PRO_SMART_ROUTING_SESSION_TTL", "30m", minimum=1)
PRO_SMART_ROUTING_KEYWORDS = env_list("PRO_SMART_ROUTING_KEYWORDS", [])  # empty: the built-in list

# Adaptive routing.
PRO_ROUTING_ENABLED = env_bool("PRO_ROUTING_ENABLED", True)
PRO_ROUTING_OBJECTIVE = env_choice("PRO_ROUTING_OBJECTIVE", "balanced", ("balanced", "latency", "cost"))
PRO_ROUTING_MIN_WEIGHT_FRACTION = env_float("PRO_ROUTING_MIN_WEIGHT_FRACTION", 0.05, minimum=0.0, maximum=0.5)
PRO_ROUTING_COOLDOWN_BASE = env_duration("PRO_ROUTING_COOLDOWN_BASE", "30s", minimum=0.001)
PRO_ROUTING_COOLDOWN_MAX = env_duration("PRO_ROUTING_COOLDOWN_MAX", "5m", minimum=0.001)
if PRO_ROUTING_COOLDOWN_MAX < PRO_ROUTING_COOLDOWN_BASE:
    raise ImproperlyConfigured("PRO_ROUTING_COOLDOWN_MAX: must not be shorter than PRO_ROUTING_COOLDOWN_BASE")
PRO_ROUTING_WARM_CACHE_WEIGHT = env_float("PRO_ROUTING_WARM_CACHE_WEIGHT", 8.0, minimum=1.0, maximum=1000.0)
PRO_ROUTING_WARM_CACHE_TTL = env_duration("PRO_ROUTING_WARM_CACHE_TTL", "10m", minimum=0)
# Cold start and exploration: a share of each adaptive virtual model's picks goes to a uniformly drawn healthy
# target, and a target with fewer latency samples than this counts as the fastest (docs/adaptive-routing.md).
PRO_ROUTING_EXPLORATION = env_float("PRO_ROUTING_EXPLORATION", 0.01, minimum=0.0, maximum=0.5)
PRO_ROUTING_COLD_START_OBSERVATIONS = env_int("PRO_ROUTING_COLD_START_OBSERVATIONS", 5, minimum=0, maximum=1000)
# Background probes: how often a target cooling for 5xx or network failures, or locked out for 401/403/404, is
# probed (one prober per process, or per cluster with REDIS_URL; docs/routing-policies.md). 0 switches them off.
PRO_ROUTING_PROBE_INTERVAL = env_duration("PRO_ROUTING_PROBE_INTERVAL", "15s", minimum=0)
if 0 < PRO_ROUTING_PROBE_INTERVAL < 0.1:
    raise ImproperlyConfigured("PRO_ROUTING_PROBE_INTERVAL: must be 0 (off) or at least 100ms")

# How long a stored Responses API answer can be continued with previous_response_id (a Go duration; 720h is 30
# days); an expired response is never continued, and a conversation none of whose responses can be continued is
# deleted by the routing.tasks.purge_expired_responses beat task or ``manage.py purge_responses``.
GOMODEL_RESPONSES_RETENTION = env_duration("GOMODEL_RESPONSES_RETENTION", "720h", minimum=1)
# How long a settled Idempotency-Key operation (its stored answer, or "unknown") is kept, and a tool-execution
# ledger entry once it was claimed or reported (Go durations; 24h and 168h, 7 days): a repeat within it gets the
# stored answer or result, a later one is new. Expired rows are never read and are deleted by the
# routing.tasks.purge_expired_operations and purge_expired_executions beat tasks, or ``manage.py
# purge_idempotency`` and ``manage.py purge_ledger``; a row whose lease has not lapsed (a request still in flight,
# an execution still claimed) is kept until it does, whatever the retention (routing/clients/retention.py).
GOMODEL_IDEMPOTENCY_RETENTION = env_duration("GOMODEL_IDEMPOTENCY_RETENTION", "24h", minimum=60)
GOMODEL_LEDGER_RETENTION = env_duration("GOMODEL_LEDGER_RETENTION", "168h", minimum=60)

# --------------------------------------------------------------------------------------------------------
# Audit
# --------------------------------------------------------------------------------------------------------

AUDIT_STORE_BODIES = env_bool("AUDIT_STORE_BODIES", False)
AUDIT_BODY_MAX_BYTES = env_int("AUDIT_BODY_MAX_BYTES", 64 * 1024, minimum=0)
AUDIT_RETENTION_DAYS = env_int("AUDIT_RETENTION_DAYS", 30, minimum=1)
AUDIT_SPOOL_DIR = Path(env_str("AUDIT_SPOOL_DIR", str(VAR_DIR / "audit-spool")))
# Disk the spool may use on this host (all gateway processes together); past it, as on a full disk, events wait
# in memory (AUDIT_BUFFER_MAX_EVENTS) and then new ones are dropped and counted.
AUDIT_SPOOL_MAX_BYTES = env_int("AUDIT_SPOOL_MAX_BYTES", 1024 * 1024 * 1024, minimum=1024 * 1024)
AUDIT_BATCH_SIZE = env_int("AUDIT_BATCH_SIZE", 200, minimum=1)
if env_str("AUDIT_BATCH_SECONDS"):
    raise ImproperlyConfigured("AUDIT_BATCH_SECONDS: renamed AUDIT_FLUSH_INTERVAL, a duration such as 500ms")
# The longest an event waits in memory before the publisher delivers or spools it (the journal below keeps a
# copy on disk meanwhile, so a SIGKILL loses none of them; docs/audit.md).
AUDIT_FLUSH_INTERVAL = env_duration("AUDIT_FLUSH_INTERVAL", "500ms", minimum=0.01)
AUDIT_BUFFER_MAX_EVENTS = env_int("AUDIT_BUFFER_MAX_EVENTS", 50_000, minimum=100)
AUDIT_PUBLISH_TIMEOUT = env_float("AUDIT_PUBLISH_TIMEOUT", 10.0, minimum=0.5)
AUDIT_INGEST_RETRY_SECONDS = env_float("AUDIT_INGEST_RETRY_SECONDS", 300.0, minimum=10)
# The audit journal (audit/delivery/journal.py): each event is written, encrypted under a key derived from SECRET_KEY,
# to the process's journal before the client gets the answer's last bytes, so a process killed outright (SIGKILL,
# OOM) loses no audit event; the next process sharing the directory replays it. Beside the spool by default,
# so the spool's volume holds both. AUDIT_JOURNAL_MAX_BYTES caps one process's journal (past it, events wait in
# memory only, counted); AUDIT_JOURNAL_FSYNC adds an fdatasync per publisher batch and round (power loss).
AUDIT_JOURNAL = env_bool("AUDIT_JOURNAL", True)
AUDIT_JOURNAL_DIR = Path(env_str("AUDIT_JOURNAL_DIR", str(AUDIT_SPOOL_DIR / "journal")))
AUDIT_JOURNAL_MAX_BYTES = env_int("AUDIT_JOURNAL_MAX_BYTES", 256 * 1024 * 1024, minimum=1024 * 1024)
AUDIT_JOURNAL_FSYNC = env_bool("AUDIT_JOURNAL_FSYNC", False)

# Shutdown: on SIGTERM or SIGINT a worker stops accepting, answers 503 on /health/ready, lets the requests in
# flight finish for at most this long (then cancels them), and flushes the audit (routing/ops/shutdown.py).
GOMODEL_SHUTDOWN_GRACE = env_duration("GOMODEL_SHUTDOWN_GRACE", "30s", minimum=0)

CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", "")
CELERY_TASK_ACKS_LATE = True
# Never acknowledge a message whose task did not finish: a task over its time limit is requeued, a failed one
# rejected (a dead-letter exchange, if configured, keeps it). The audit task does not fail at all: a batch it
# could not store is requeued explicitly, and events the database refuses are kept aside (audit/tasks.py).
CELERY_TASK_ACKS_ON_FAILURE = False
CELERY_TASK_ACKS_ON_TIMEOUT = False
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_BROKER_CONNECTION_TIMEOUT = 3
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# A hung broker must not hang the publisher: every socket operation has a deadline.
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "socket_timeout": 3,
    "socket_connect_timeout": 3,
    "max_retries": 1,
    "visibility_timeout": 3600,
    "confirm_publish": True,
}
CELERY_BROKER_HEARTBEAT = 10
CELERY_TASK_ALWAYS_EAGER = False
# Celery's Django fix-up closes the database connection around every task, and in a prefork worker with
# the psycopg pool it closes the pool too: one new PostgreSQL connection per audit batch. With this it
# keeps them for 1,000 tasks (a connection that died is still replaced: ingest resets it and retries).
CELERY_DB_REUSE_MAX = 1000
CELERY_BEAT_SCHEDULE = {
    "audit-retention": {"task": "audit.tasks.purge_old_revisions", "schedule": 3600.0},
    "responses-retention": {"task": "routing.tasks.purge_expired_responses", "schedule": 3600.0},
    "idempotency-retention": {"task": "routing.tasks.purge_expired_operations", "schedule": 3600.0},
    "ledger-retention": {"task": "routing.tasks.purge_expired_executions", "schedule": 3600.0},
}
# When each entry last ran, under var/ (Celery's default is ./celerybeat-schedule, written into whatever folder beat
# starts in: the checkout); ``--schedule`` still overrides it. The scheduler creates the folder on first start.
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")
CELERY_BEAT_SCHEDULER = "gomodel_site.beat_scheduler.SchedulerInVar"

# --------------------------------------------------------------------------------------------------------
# Logging: one line per event; provider keys are scrubbed by a filter on every handler.
# --------------------------------------------------------------------------------------------------------

LOG_LEVEL = env_choice("GOMODEL_LOG_LEVEL", "info", ("debug", "info", "warning", "error")).upper()
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"redact": {"()": "routing.ops.log_redaction.RedactSecretsFilter"}},
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain", "filters": ["redact"]}},
    "root": {"handlers": ["console"], "level": "WARNING"},
    "loggers": {
        "gomodel": {"handlers": ["console"], "level": LOG_LEVEL, "propagate": False},
        "django": {"handlers": ["console"], "level": "WARNING", "propagate": False},
    },
}

# --------------------------------------------------------------------------------------------------------
# Production refuses to start without a secret key (see DJANGO_SECRET_KEY above); checked last.
# --------------------------------------------------------------------------------------------------------

if not SECRET_KEY:
    raise ImproperlyConfigured(
        "DJANGO_SECRET_KEY: not set; production needs a long random value (python3 -c 'import secrets; "
        "print(secrets.token_urlsafe(50))'), given directly or as DJANGO_SECRET_KEY_FILE"
    )
