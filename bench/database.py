"""The benchmark's own PostgreSQL database: created, migrated and dropped by
the runner, and the environment every benchmark process shares.

The database named by ``DATABASE_URL`` (default
``postgresql://postgres@127.0.0.1:5432/memoryui_bench``) is dropped and
created at the start of a run. To keep a run from ever dropping a
development or test database, its name must contain ``bench``.
"""
from __future__ import annotations

import os
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql

DEFAULT_DATABASE_URL = "postgresql://postgres@127.0.0.1:5432/memoryui_bench"
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/13"


class UnsafeDatabase(RuntimeError):
    """The configured database name does not say ``bench``: refuse to drop it."""


def database_name(url: str) -> str:
    """The database name in a ``postgresql://`` URL."""
    return urlsplit(url).path.lstrip("/")


def maintenance_url(url: str) -> str:
    """The same server's ``postgres`` database (to create or drop ``url``'s)."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "/postgres", parts.query, parts.fragment))


def configure_environment() -> dict[str, str]:
    """Set the variables Django, the web server and Celery read, for this process
    and its children: the bench database and Redis database (defaults above
    unless set), ``DEBUG=0`` (no per-query memory growth), a fixed secret
    key, the settings module. Returns the variables set."""
    env = {
        "DATABASE_URL": os.environ.get("DATABASE_URL") or DEFAULT_DATABASE_URL,
        "REDIS_URL": os.environ.get("REDIS_URL") or DEFAULT_REDIS_URL,
        "DEBUG": "0",
        "SECRET_KEY": os.environ.get("SECRET_KEY") or "bench-only-secret-key-not-for-production",
        "DJANGO_SETTINGS_MODULE": "memoryui.settings",
        "LOG_LEVEL": "ERROR",
    }
    os.environ.update(env)
    return env


def recreate(url: str) -> None:
    """Drop (forcing out leftover sessions) and create the database of
    ``url``. Raises :class:`UnsafeDatabase` unless its name contains
    ``bench``."""
    name = database_name(url)
    if "bench" not in name:
        raise UnsafeDatabase(f"refusing to drop database {name!r}: a benchmark database name must contain 'bench'")
    with psycopg.connect(maintenance_url(url), autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def drop(url: str) -> None:
    """Drop the database of ``url`` (same safety rule as :func:`recreate`)."""
    name = database_name(url)
    if "bench" not in name:
        raise UnsafeDatabase(f"refusing to drop database {name!r}")
    with psycopg.connect(maintenance_url(url), autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def setup_django() -> None:
    """``django.setup()`` and ``migrate`` the bench database (quietly)."""
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0, interactive=False)


def stored_assertions(url: str) -> int:
    """How many assertion rows the store holds (all tenants)."""
    with psycopg.connect(url) as conn:
        return conn.execute("SELECT count(*) FROM facts_assertion").fetchone()[0]
