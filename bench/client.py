"""A concurrent HTTP client for the server under test: batch imports,
signed webhooks, timed reads. Every loop is bounded by the work it was
given and by a deadline; nothing retries forever.

Work is handed out in *units*: a list of requests one client thread sends
in order (a subject's events never race each other). Threads take units
from a shared queue until it is empty.
"""
from __future__ import annotations

import json
import queue
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Iterable, Sequence

import requests
from standardwebhooks.webhooks import Webhook

from bench.generate import BenchEvent, SubjectHistory

BATCH_LIMIT = 1000


@dataclass
class IngestResult:
    """What one ingest phase did. ``seconds`` is wall time; ``latencies``
    are per request, in seconds."""

    events: int = 0
    assertions: int = 0
    seconds: float = 0.0
    requests: int = 0
    latencies: list[float] = field(default_factory=list)
    outcomes: Counter = field(default_factory=Counter)
    refusals: list[dict] = field(default_factory=list)

    @property
    def assertions_per_second(self) -> float:
        return self.assertions / self.seconds if self.seconds else 0.0

    @property
    def events_per_second(self) -> float:
        return self.events / self.seconds if self.seconds else 0.0


class ClientError(RuntimeError):
    """The server failed (5xx, connection refused, timeout) or the deadline passed."""


def batch_units(histories: Sequence[SubjectHistory], *, batch_size: int) -> list[list[list[BenchEvent]]]:
    """Pack whole subjects into batches of at most ``batch_size`` events; a
    subject larger than a batch becomes a unit of consecutive batches."""
    units: list[list[list[BenchEvent]]] = []
    current: list[BenchEvent] = []
    for h in histories:
        if len(h.events) > batch_size:
            units.append([h.events[i:i + batch_size] for i in range(0, len(h.events), batch_size)])
            continue
        if len(current) + len(h.events) > batch_size:
            units.append([current])
            current = []
        current.extend(h.events)
    if current:
        units.append([current])
    return units


def _run_units(units: list, *, clients: int, send, deadline_seconds: float) -> IngestResult:
    """Run ``send(session, request, result, lock)`` for every request of
    every unit, ``clients`` threads, each with its own keep-alive session."""
    work: queue.Queue = queue.Queue()
    for unit in units:
        work.put(unit)
    result = IngestResult()
    lock = threading.Lock()
    errors: list[BaseException] = []
    deadline = time.monotonic() + deadline_seconds

    def loop() -> None:
        session = requests.Session()
        try:
            while not errors:
                try:
                    unit = work.get_nowait()
                except queue.Empty:
                    return
                for request in unit:
                    if time.monotonic() > deadline:
                        raise ClientError(f"deadline of {deadline_seconds:.0f} s passed")
                    send(session, request, result, lock)
        except BaseException as exc:  # surfaced to the caller below
            errors.append(exc)
        finally:
            session.close()

    threads = [threading.Thread(target=loop, name=f"client-{i}") for i in range(max(1, clients))]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    result.seconds = time.perf_counter() - started
    if errors:
        raise ClientError(str(errors[0])) from errors[0]
    return result


def _record(result: IngestResult, lock: threading.Lock, events: Sequence[BenchEvent], answers: Sequence[dict],
            elapsed: float) -> None:
    with lock:
        result.requests += 1
        result.latencies.append(elapsed)
        for event, answer in zip(events, answers):
            result.events += 1
            status = answer.get("status", 200)
            if status == 200:
                result.assertions += event.asserts
                result.outcomes[answer.get("outcome", "unknown")] += 1
            else:
                result.outcomes[f"refused:{status}"] += 1
                if len(result.refusals) < 10:
                    result.refusals.append({"id": event.id, "status": status, "field": answer.get("field"),
                                            "detail": answer.get("detail")})


def post_batches(*, base_url: str, api_key: str, units: list[list[list[BenchEvent]]], clients: int,
                 deadline_seconds: float = 3600.0) -> IngestResult:
    """``POST /api/v1/assertions/batch`` for every batch, ``clients``
    connections at once. Bodies are encoded before the clock starts. Raises
    :class:`ClientError` on a 5xx, a transport failure or the deadline."""
    prepared = [[(batch, json.dumps({"events": [{"id": e.id, **e.envelope} for e in batch]}).encode())
                 for batch in unit] for unit in units]
    url = f"{base_url}/api/v1/assertions/batch"
    headers = {"Authorization": f"Bearer {api_key}", "Content-Type": "application/json"}

    def send(session: requests.Session, request, result: IngestResult, lock: threading.Lock) -> None:
        batch, body = request
        started = time.perf_counter()
        response = session.post(url, data=body, headers=headers, timeout=600)
        elapsed = time.perf_counter() - started
        if response.status_code != 200:
            if response.status_code >= 500:
                raise ClientError(f"batch answered {response.status_code}: {response.text[:300]}")
            answers = [{"status": response.status_code, **response.json()}] * len(batch)
        else:
            answers = response.json()["results"]
        _record(result, lock, batch, answers, elapsed)

    return _run_units(prepared, clients=clients, send=send, deadline_seconds=deadline_seconds)


def post_webhooks(*, base_url: str, slug: str, secret: str, histories: Sequence[SubjectHistory], clients: int,
                  deadline_seconds: float = 3600.0) -> IngestResult:
    """One signed ``POST /webhooks/<slug>/`` per event (Standard Webhooks
    headers, signed just before sending: the timestamp must be fresh),
    whole subjects per client, ``clients`` connections at once. Latency is
    per webhook. Raises :class:`ClientError` like :func:`post_batches`."""
    signer = Webhook(secret)
    url = f"{base_url}/webhooks/{slug}/"
    units = [[(e, json.dumps(e.envelope, separators=(",", ":"))) for e in h.events] for h in histories]

    def send(session: requests.Session, request, result: IngestResult, lock: threading.Lock) -> None:
        event, body = request
        now = datetime.now(timezone.utc)
        headers = {"Content-Type": "application/json", "webhook-id": event.id,
                   "webhook-timestamp": str(int(now.timestamp())),
                   "webhook-signature": signer.sign(event.id, now, body)}
        started = time.perf_counter()
        response = session.post(url, data=body.encode(), headers=headers, timeout=120)
        elapsed = time.perf_counter() - started
        if response.status_code >= 500:
            raise ClientError(f"webhook answered {response.status_code}: {response.text[:300]}")
        _record(result, lock, [event], [{"status": response.status_code, **response.json()}], elapsed)

    return _run_units(units, clients=clients, send=send, deadline_seconds=deadline_seconds)


def timed_gets(*, base_url: str, headers: dict[str, str], paths: Iterable[str], warmup: int = 5,
               cookies: dict[str, str] | None = None, expect: int = 200) -> list[float]:
    """GET each path in turn on one keep-alive connection; returns the
    latencies in seconds (the first ``warmup`` requests are sent but not
    kept). Raises :class:`ClientError` on any status but ``expect``."""
    session = requests.Session()
    out: list[float] = []
    try:
        for n, path in enumerate(paths):
            started = time.perf_counter()
            response = session.get(base_url + path, headers=headers, cookies=cookies, timeout=120)
            elapsed = time.perf_counter() - started
            if response.status_code != expect:
                raise ClientError(f"GET {path} answered {response.status_code}: {response.text[:300]}")
            if n >= warmup:
                out.append(elapsed)
    finally:
        session.close()
    return out
