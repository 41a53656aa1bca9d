"""memoryui settings, read from the environment.

Variables (all optional):

- ``DATABASE_URL``: PostgreSQL URL (dj-database-url syntax). Unset: an
  embedded PostgreSQL is started (see ``memoryui/services.py``).
- ``REDIS_URL``: Celery broker URL. Unset: an embedded Redis is started.
- ``SECRET_KEY``: Django's secret; a development key is used when unset and
  ``DEBUG`` is on.
- ``DEBUG``: ``1``/``0``; default ``1`` for the zero-setup run.
- ``ALLOWED_HOSTS``: comma-separated; default ``127.0.0.1,localhost``.
- ``MEMORYUI_MAX_BODY_BYTES``: largest accepted webhook or batch body,
  default 1 MiB; larger bodies get 413.
- ``MEMORYUI_PUBLIC_URL``: base URL used in sign-in links, default
  ``http://127.0.0.1:8000``. Its origin is trusted for forms posted from
  the browser (``CSRF_TRUSTED_ORIGINS``), so that the pages work behind a
  proxy that ends TLS; when it is ``https://``, the session and CSRF cookies
  are sent over HTTPS only. See :func:`https_settings`.
- ``CSRF_TRUSTED_ORIGINS``: further origins (comma-separated,
  ``https://host[:port]``) whose forms are accepted.
- ``MEMORYUI_TRUST_X_FORWARDED_PROTO`` (``0``): ``1`` behind a proxy that
  sets ``X-Forwarded-Proto`` (and drops the client's own): requests it
  marks ``https`` count as secure (Django's ``SECURE_PROXY_SSL_HEADER``).
- ``CELERY_QUEUE``: the Celery queue tasks go to, default ``celery``.
- ``MEMORYUI_WEBHOOK_TIMEOUT_SECONDS`` (10), ``MEMORYUI_WEBHOOK_BACKOFF_BASE_SECONDS``
  (10), ``MEMORYUI_WEBHOOK_BACKOFF_MAX_SECONDS`` (3600),
  ``MEMORYUI_WEBHOOK_MAX_ATTEMPTS`` (12), ``MEMORYUI_OUTBOX_STUCK_SECONDS`` (60):
  outgoing webhook delivery and the outbox sweep.
- ``MEMORYUI_WEBHOOK_PRIVATE_TARGETS`` (``0``): ``1`` lets tenants register
  outgoing webhook URLs on loopback, private or link-local addresses
  (development and tests); off, such URLs are refused with a 400.
- ``MEMORYUI_RECEIPT_RETENTION_DAYS`` (30): whole days an inbound webhook or
  batch event's idempotency receipt is kept; older ones are purged nightly
  (``facts/retention.py``).
- ``DATABASE_CONN_MAX_AGE`` (60): seconds a process keeps its database
  connection between requests (Django's ``CONN_MAX_AGE``). ``0`` under
  ``manage.py runserver`` (``bin/demo`` sets it): its threads never close
  the connections they keep, so each request thread would hold one until
  PostgreSQL runs out.
- ``MEMORYUI_PREPARED_STATEMENTS`` (``1``): the write path's statements and
  the hot reads (facts now, context) run as prepared statements, parsed
  and planned once per connection. ``0`` behind a pooler that cannot keep
  them (PgBouncer in transaction mode); they are then planned every time.
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

import dj_database_url
from celery.schedules import crontab

from memoryui.services import ensure_service_urls

BASE_DIR = Path(__file__).resolve().parent.parent


_TRUE = {"1", "true", "yes", "on"}


def _env_bool(name: str, default: bool) -> bool:
    return os.environ.get(name, "1" if default else "0").lower() in _TRUE


def https_settings(environ: Mapping[str, str], public_url: str) -> dict:
    """Settings for browsers that reach memoryui at ``public_url``, often
    through a proxy that ends TLS and forwards plain HTTP: Django refuses a
    form posted from ``https://host`` to a server that sees ``http://host``
    (403, "Origin checking failed") unless the origin is trusted.

    Returns ``{"CSRF_TRUSTED_ORIGINS": [origin, ...], "SESSION_COOKIE_SECURE":
    bool, "CSRF_COOKIE_SECURE": bool, "SECURE_PROXY_SSL_HEADER": tuple | None}``:
    the origin (``scheme://host[:port]``) of ``public_url`` and those listed
    in ``environ["CSRF_TRUSTED_ORIGINS"]``; secure cookies when
    ``public_url`` is ``https``; ``X-Forwarded-Proto`` trusted only when
    ``environ["MEMORYUI_TRUST_X_FORWARDED_PROTO"]`` is on. Raises
    ``ValueError`` naming the variable when a URL or origin has no
    ``http``/``https`` scheme or no host.
    """
    def origin(url: str, name: str) -> str:
        parts = urlsplit(url.strip())
        if parts.scheme not in {"http", "https"} or not parts.netloc:
            raise ValueError(f"{name}: {url.strip()!r} is not an http(s)://host[:port] URL")
        return f"{parts.scheme}://{parts.netloc}"

    origins = [origin(public_url, "MEMORYUI_PUBLIC_URL")]
    origins += [origin(o, "CSRF_TRUSTED_ORIGINS") for o in environ.get("CSRF_TRUSTED_ORIGINS", "").split(",")
                if o.strip()]
    secure = urlsplit(public_url.strip()).scheme == "https"
    trust_proto = environ.get("MEMORYUI_TRUST_X_FORWARDED_PROTO", "0").lower() in _TRUE
    return {"CSRF_TRUSTED_ORIGINS": list(dict.fromkeys(origins)), "SESSION_COOKIE_SECURE": secure,
            "CSRF_COOKIE_SECURE": secure,
            "SECURE_PROXY_SSL_HEADER": ("HTTP_X_FORWARDED_PROTO", "https") if trust_proto else None}


ensure_service_urls()

DEBUG = _env_bool("DEBUG", True)
SECRET_KEY = os.environ.get("SECRET_KEY") or (
    "dev-only-insecure-key-memoryui" if DEBUG else None
)
if not SECRET_KEY:
    raise RuntimeError("SECRET_KEY must be set when DEBUG is off")
ALLOWED_HOSTS = [h.strip() for h in os.environ.get("ALLOWED_HOSTS", "127.0.0.1,localhost,testserver").split(",") if h.strip()]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_htmx",
    "template_partials",
    "ninja",  # the API docs page loads Swagger UI from django-ninja's static files, not a CDN
    "facts",
    "conflicts",
    "dashboard",
    "console",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "console.audit.AuditMiddleware",
]

ROOT_URLCONF = "memoryui.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
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

WSGI_APPLICATION = "memoryui.wsgi.application"

DATABASES = {
    "default": dj_database_url.parse(os.environ["DATABASE_URL"],
                                     conn_max_age=int(os.environ.get("DATABASE_CONN_MAX_AGE", "60"))),
}
DATABASES["default"].setdefault("TEST", {})["NAME"] = os.environ.get("TEST_DATABASE_NAME", "test_memoryui")
# The hot statements are prepared once per connection (SQL PREPARE; see
# facts.bulk.PreparedStatements), and planned once: every session runs
# prepared statements on their generic plan, and only those statements are
# prepared. psycopg's own preparing stays off: on a rollback it deallocates
# every prepared statement of the session.
MEMORYUI_PREPARED_STATEMENTS = _env_bool("MEMORYUI_PREPARED_STATEMENTS", True)
_db_options = DATABASES["default"].setdefault("OPTIONS", {})
_db_options["prepare_threshold"] = None
_db_options["options"] = " ".join(filter(None, [_db_options.get("options"),
                                                "-c plan_cache_mode=force_generic_plan"]))

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-gb"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = BASE_DIR / "staticfiles"

LOGIN_URL = "/login/"

REDIS_URL = os.environ["REDIS_URL"]
CELERY_BROKER_URL = REDIS_URL
CELERY_RESULT_BACKEND = None
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_ALWAYS_EAGER = _env_bool("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BROKER_TRANSPORT_OPTIONS = {"max_retries": 1, "interval_start": 0, "interval_step": 0.2,
                                   "socket_connect_timeout": 2}
CELERY_TASK_DEFAULT_QUEUE = os.environ.get("CELERY_QUEUE", "celery")
# conflicts/: periodic tasks for celery beat (seconds); each run expires
# rather than pile up while no worker consumes.
CELERY_BEAT_SCHEDULE: dict = {
    "conflicts-escalate-prompts": {"task": "conflicts.escalate_prompts", "schedule": 60.0, "options": {"expires": 60}},
    "conflicts-expire-prompts": {"task": "conflicts.expire_prompts", "schedule": 300.0, "options": {"expires": 300}},
    "conflicts-sweep": {"task": "conflicts.sweep", "schedule": 30.0, "options": {"expires": 30}},
    "conflicts-reconcile-nightly": {"task": "conflicts.reconcile", "schedule": crontab(hour=3, minute=15),
                                    "kwargs": {"repair": True}},
    "conflicts-purge-receipts-nightly": {"task": "conflicts.purge_receipts", "schedule": crontab(hour=3, minute=45)},
}
# conflicts/: outgoing webhooks (seconds).
MEMORYUI_WEBHOOK_TIMEOUT_SECONDS = float(os.environ.get("MEMORYUI_WEBHOOK_TIMEOUT_SECONDS", "10"))
MEMORYUI_WEBHOOK_BACKOFF_BASE_SECONDS = float(os.environ.get("MEMORYUI_WEBHOOK_BACKOFF_BASE_SECONDS", "10"))
MEMORYUI_WEBHOOK_BACKOFF_MAX_SECONDS = float(os.environ.get("MEMORYUI_WEBHOOK_BACKOFF_MAX_SECONDS", "3600"))
MEMORYUI_WEBHOOK_MAX_ATTEMPTS = int(os.environ.get("MEMORYUI_WEBHOOK_MAX_ATTEMPTS", "12"))
MEMORYUI_WEBHOOK_PRIVATE_TARGETS = _env_bool("MEMORYUI_WEBHOOK_PRIVATE_TARGETS", False)
MEMORYUI_OUTBOX_STUCK_SECONDS = float(os.environ.get("MEMORYUI_OUTBOX_STUCK_SECONDS", "60"))
# facts/retention.py: idempotency receipts older than this (whole days) are purged nightly.
MEMORYUI_RECEIPT_RETENTION_DAYS = int(os.environ.get("MEMORYUI_RECEIPT_RETENTION_DAYS", "30"))

MEMORYUI_MAX_BODY_BYTES = int(os.environ.get("MEMORYUI_MAX_BODY_BYTES", str(1024 * 1024)))
MEMORYUI_PUBLIC_URL = os.environ.get("MEMORYUI_PUBLIC_URL", "http://127.0.0.1:8000")
_https = https_settings(os.environ, MEMORYUI_PUBLIC_URL)
CSRF_TRUSTED_ORIGINS = _https["CSRF_TRUSTED_ORIGINS"]
SESSION_COOKIE_SECURE = _https["SESSION_COOKIE_SECURE"]
CSRF_COOKIE_SECURE = _https["CSRF_COOKIE_SECURE"]
SECURE_PROXY_SSL_HEADER = _https["SECURE_PROXY_SSL_HEADER"]
DATA_UPLOAD_MAX_MEMORY_SIZE = MEMORYUI_MAX_BODY_BYTES * 8

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "WARNING")},
}
