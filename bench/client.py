"""A concurrent HTTP client for the server under test: batch imports,
signed webhooks, timed reads. Every loop is bounded by the work it was
given and by a deadline; nothing retries forever.

Work is handed out in *units*: a list of requests one client thread sends
in order (a subject's events never race each other). Threads take units
from a shared queue until it is empty.
"""
from __future__ import annotations

import http.client
import itertools
import json
import queue
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Iterable, Sequence
from urllib.parse import urlsplit

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


@dataclass
class Answer:
    """One HTTP response: status code and body bytes."""

    status: int
    body: bytes

    def json(self):
        return json.loads(self.body)

    @property
    def text(self) -> str:
        return self.body.decode(errors="replace")


class Connection:
    """One client connection to the server under test, on the standard
    library's ``http.client``: the client's own work per request is a few
    tens of microseconds, so what is timed is the server (``requests``
    spent about 0.9 ms of this machine's CPU per request, beside a
    psycopg baseline that spends almost none).

    The connection is kept while the server keeps it (HTTP/1.1 keep-alive;
    when the server closes it, a new one is opened for the next request).
    A request that finds a kept connection closed by the server before any
    answer is sent again once on a new connection. Transport failures and
    timeouts raise :class:`ClientError`."""

    def __init__(self, base_url: str, *, timeout: float = 120.0):
        parts = urlsplit(base_url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.timeout = timeout
        self._conn: http.client.HTTPConnection | None = None

    def request(self, method: str, path: str, *, body: bytes | None = None,
                headers: dict[str, str] | None = None) -> Answer:
        for attempt in (1, 2):
            reused = self._conn is not None
            if self._conn is None:
                self._conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
            try:
                self._conn.request(method, path, body=body, headers=headers or {})
                response = self._conn.getresponse()
                answer = Answer(response.status, response.read())
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as exc:
                self.close()
                if reused and attempt == 1:
                    continue
                raise ClientError(f"{method} {path}: {exc!r}") from exc
            except (OSError, http.client.HTTPException) as exc:
                self.close()
                raise ClientError(f"{method} {path}: {exc!r}") from exc
            if response.will_close:
                self.close()
            return answer
        raise AssertionError("unreachable")

    def get(self, path: str, *, headers: dict[str, str] | None = None) -> Answer:
        return self.request("GET", path, headers=headers)

    def post(self, path: str, body: bytes, *, headers: dict[str, str] | None = None) -> Answer:
        return self.request("POST", path, body=body, headers=headers)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


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


def _run_units(units: list, *, base_url: str, clients: int, send, deadline_seconds: float,
               rate: float | None = None) -> IngestResult:
    """Run ``send(connection, request, result, lock, due)`` for every
    request of every unit, ``clients`` threads, each with its own
    :class:`Connection`.

    Closed loop (``rate`` ``None``): each thread sends its next request as
    soon as the last one is answered; ``due`` is ``None``. Open loop:
    requests are due at ``rate`` per second from the start, whoever sends
    them; a thread sleeps until the next due time, or sends at once when it
    is late, and ``due`` (a ``perf_counter`` time) is when the request was
    due, so that a latency measured from it includes the wait for a free
    connection (no coordinated omission)."""
    work: queue.Queue = queue.Queue()
    for unit in units:
        work.put(unit)
    result = IngestResult()
    lock = threading.Lock()
    errors: list[BaseException] = []
    deadline = time.monotonic() + deadline_seconds
    slots = itertools.count()
    started = 0.0

    def loop() -> None:
        connection = Connection(base_url, timeout=600)
        try:
            while not errors:
                try:
                    unit = work.get_nowait()
                except queue.Empty:
                    return
                for request in unit:
                    if time.monotonic() > deadline:
                        raise ClientError(f"deadline of {deadline_seconds:.0f} s passed")
                    due = None
                    if rate:
                        with lock:
                            due = started + next(slots) / rate
                        ahead = due - time.perf_counter()
                        if ahead > 0:
                            time.sleep(ahead)
                    send(connection, request, result, lock, due)
        except BaseException as exc:  # surfaced to the caller below
            errors.append(exc)
        finally:
            connection.close()

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
    path = "/api/v1/assertions/batch"
    headers = {"Authorization": f"Bearer {api_key}", "Content-Type": "application/json"}

    def send(connection: Connection, request, result: IngestResult, lock: threading.Lock, due) -> None:
        batch, body = request
        started = time.perf_counter()
        response = connection.post(path, body, headers=headers)
        elapsed = time.perf_counter() - started
        if response.status != 200:
            if response.status >= 500:
                raise ClientError(f"batch answered {response.status}: {response.text[:300]}")
            answers = [{"status": response.status, **response.json()}] * len(batch)
        else:
            answers = response.json()["results"]
        _record(result, lock, batch, answers, elapsed)

    return _run_units(prepared, base_url=base_url, clients=clients, send=send, deadline_seconds=deadline_seconds)


def post_webhooks(*, base_url: str, slug: str, secret: str, histories: Sequence[SubjectHistory], clients: int,
                  deadline_seconds: float = 3600.0, rate: float | None = None) -> IngestResult:
    """One signed ``POST /webhooks/<slug>/`` per event (Standard Webhooks
    headers, signed just before sending: the timestamp must be fresh),
    whole subjects per client, ``clients`` connections at once: as fast as
    answered, or ``rate`` webhooks per second offered (see
    :func:`_run_units`; latency then counts from when each was due).
    Latency is per webhook. Raises :class:`ClientError` like
    :func:`post_batches`."""
    signer = Webhook(secret)
    path = f"/webhooks/{slug}/"
    units = [[(e, json.dumps(e.envelope, separators=(",", ":"))) for e in h.events] for h in histories]

    def send(connection: Connection, request, result: IngestResult, lock: threading.Lock, due) -> None:
        event, body = request
        now = datetime.now(timezone.utc)
        headers = {"Content-Type": "application/json", "webhook-id": event.id,
                   "webhook-timestamp": str(int(now.timestamp())),
                   "webhook-signature": signer.sign(event.id, now, body)}
        started = time.perf_counter() if due is None else due
        response = connection.post(path, body.encode(), headers=headers)
        elapsed = time.perf_counter() - started
        if response.status >= 500:
            raise ClientError(f"webhook answered {response.status}: {response.text[:300]}")
        _record(result, lock, [event], [{"status": response.status, **response.json()}], elapsed)

    return _run_units(units, base_url=base_url, clients=clients, send=send, deadline_seconds=deadline_seconds,
                      rate=rate)


def timed_gets(*, base_url: str, headers: dict[str, str], paths: Iterable[str], warmup: int = 5,
               expect: int = 200) -> list[float]:
    """GET each path in turn on one :class:`Connection`; returns the
    latencies in seconds (the first ``warmup`` requests are sent but not
    kept). Raises :class:`ClientError` on any status but ``expect``."""
    connection = Connection(base_url)
    out: list[float] = []
    try:
        for n, path in enumerate(paths):
            started = time.perf_counter()
            response = connection.get(path, headers=headers)
            elapsed = time.perf_counter() - started
            if response.status != expect:
                raise ClientError(f"GET {path} answered {response.status}: {response.text[:300]}")
            if n >= warmup:
                out.append(elapsed)
    finally:
        connection.close()
    return out
