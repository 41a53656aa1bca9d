"""The end user's memory page (``GET /``) for a subject with many memories:
server time and query count.

Sign-in uses only public contracts: ``POST /api/v1/subjects/<id>/login-link``
(API.md) and the link's page. The page is then timed in this process with
Django's test client (the whole middleware, view and template stack, no
network: "server time"), counting queries, and over HTTP against the
running server with the same session.
"""
from __future__ import annotations

import time

from bench.client import Connection, timed_gets
from bench.stats import latency_summary


def unavailable_reason() -> str | None:
    """``None`` when the dashboard's memory page is routed at ``/``, else a
    sentence saying what is missing."""
    from django.apps import apps
    from django.urls import Resolver404, resolve

    if not apps.is_installed("dashboard"):
        return "dashboard measurement skipped: the dashboard app is not installed"
    try:
        match = resolve("/")
    except Resolver404:
        return "dashboard measurement skipped: no page is routed at /"
    if not match.func.__module__.startswith("dashboard"):
        return f"dashboard measurement skipped: / is served by {match.func.__module__}, not the dashboard"
    return None


def sign_in(*, base_url: str, api_key: str, subject: str):
    """A Django test client signed in as ``subject`` through a one-time
    link. Raises ``RuntimeError`` when the link is refused."""
    from django.test import Client

    connection = Connection(base_url, timeout=60)
    response = connection.post(f"/api/v1/subjects/{subject}/login-link", b"",
                               headers={"Authorization": f"Bearer {api_key}"})
    connection.close()
    if response.status != 200:
        raise RuntimeError(f"login-link for {subject} answered {response.status}: {response.text[:200]}")
    path = "/" + response.json()["url"].split("/", 3)[3]
    client = Client()
    answer = client.post(path)
    if answer.status_code not in (200, 302):
        raise RuntimeError(f"signing in through {path} answered {answer.status_code}")
    return client


def measure_page(*, client, base_url: str, samples: int, warmup: int = 3) -> dict:
    """Time ``GET /`` ``samples`` times in process (server time, with the
    query count of each request) and over HTTP with the client's session.
    Returns ``{"server": summary, "http": summary, "queries": [min, max],
    "status": code}`` (summaries in ms, see :func:`latency_summary`)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    status = 0
    for _ in range(warmup):
        status = client.get("/").status_code
    server, counts = [], []
    for _ in range(samples):
        with CaptureQueriesContext(connection) as ctx:
            started = time.perf_counter()
            response = client.get("/")
            server.append(time.perf_counter() - started)
        status = response.status_code
        counts.append(len(ctx.captured_queries))
    cookie = "; ".join(f"{name}={morsel.value}" for name, morsel in client.cookies.items())
    http = timed_gets(base_url=base_url, headers={"Cookie": cookie}, paths=["/"] * (samples + warmup), warmup=warmup)
    return {"server": latency_summary(server), "http": latency_summary(http), "queries": [min(counts), max(counts)],
            "status": status}
