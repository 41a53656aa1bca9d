"""The baseline: the raw database doing the least possible work on the same
rows, in the same run, on the same server.

One plain table in the bench database (``bench_plain_assertion``) with a
bigserial key and one composite index that serves every lookup
(tenant, subject, entity, predicate, scope, valid_from). Ingest is measured
as one ``INSERT`` per assertion (the slice memoryui ingests through its
batch endpoint, same number of connections, a commit per 1,000 rows like a
batch request; and one autocommitted ``INSERT`` per webhook-sized request)
and as ``COPY`` (the preloaded rows). Lookups are the plain indexed
``SELECT`` s closest to each memoryui read, with server-side prepared
statements.
"""
from __future__ import annotations

import threading
import time
from datetime import datetime
from typing import Iterable, Sequence

import psycopg
from psycopg.types.json import Jsonb

from bench.generate import BenchEvent, SubjectHistory

TABLE = "bench_plain_assertion"
COLUMNS = ("tenant", "subject", "entity", "predicate", "scope", "value", "valid_from", "valid_to", "stated_at",
           "recorded_at", "source_kind", "source_id", "extractor", "evidence")

DDL = f"""
CREATE TABLE IF NOT EXISTS {TABLE} (
    id bigserial PRIMARY KEY,
    tenant text NOT NULL, subject text NOT NULL, entity text NOT NULL, predicate text NOT NULL,
    scope text NOT NULL, value jsonb, valid_from timestamptz NOT NULL, valid_to timestamptz,
    stated_at timestamptz NOT NULL, recorded_at timestamptz NOT NULL DEFAULT now(),
    source_kind text NOT NULL, source_id text NOT NULL, extractor text, evidence text,
    retracted_at timestamptz
);
CREATE INDEX IF NOT EXISTS {TABLE}_lookup ON {TABLE} (tenant, subject, entity, predicate, scope, valid_from);
"""

INSERT = f"INSERT INTO {TABLE} ({', '.join(COLUMNS)}) VALUES ({', '.join(['%s'] * len(COLUMNS))})"

# The plain SELECT closest to each memoryui read. Parameters: tenant, subject, then as named.
LOOKUPS = {
    "facts_now": f"SELECT * FROM {TABLE} WHERE tenant = %s AND subject = %s AND retracted_at IS NULL "
                 "AND valid_from <= now() AND (valid_to IS NULL OR valid_to > now())",
    "context": f"SELECT entity, predicate, scope, value, source_kind, valid_from FROM {TABLE} "
               "WHERE tenant = %s AND subject = %s AND retracted_at IS NULL "
               "AND valid_from <= now() AND (valid_to IS NULL OR valid_to > now())",
    "history": f"SELECT * FROM {TABLE} WHERE tenant = %s AND subject = %s AND entity = %s AND predicate = %s "
               "AND scope = %s ORDER BY valid_from",
    "as_of_valid": f"SELECT * FROM {TABLE} WHERE tenant = %s AND subject = %s AND retracted_at IS NULL "
                   "AND valid_from <= %s AND (valid_to IS NULL OR valid_to > %s)",
    "as_of_known": f"SELECT * FROM {TABLE} WHERE tenant = %s AND subject = %s AND recorded_at <= %s "
                   "AND (retracted_at IS NULL OR retracted_at > %s) "
                   "AND valid_from <= now() AND (valid_to IS NULL OR valid_to > now())",
}


def create(url: str) -> None:
    """Create the plain table and its index (idempotent)."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(DDL)


def _time(raw: str | None) -> datetime | None:
    return datetime.fromisoformat(raw.replace("Z", "+00:00")) if raw else None


def rows(events: Iterable[BenchEvent], *, tenant: str) -> list[tuple]:
    """The plain rows of the ``fact.asserted`` events (retractions are not rows)."""
    out = []
    for e in events:
        if not e.asserts:
            continue
        d = e.envelope["data"]
        src = d["source"]
        out.append((tenant, d["subject"], d.get("entity") or "self", d["predicate"], d.get("scope") or "global",
                    Jsonb(d["value"]), _time(d.get("valid_from") or d.get("stated_at")), _time(d.get("valid_to")),
                    _time(d.get("stated_at")), datetime.now().astimezone(), src["kind"], src["id"],
                    src.get("extractor", ""), src.get("evidence", "")))
    return out


def copy(url: str, plain_rows: Sequence[tuple]) -> float:
    """``COPY`` ``plain_rows`` into the table in one transaction; returns seconds."""
    started = time.perf_counter()
    with psycopg.connect(url) as conn:
        with conn.cursor() as cur, cur.copy(f"COPY {TABLE} ({', '.join(COLUMNS)}) FROM STDIN") as cp:
            for row in plain_rows:
                cp.write_row(row)
        conn.commit()
    return time.perf_counter() - started


def insert(url: str, chunks: Sequence[Sequence[tuple]], *, clients: int, commit_every: int = 1000,
           latencies: bool = False) -> tuple[float, list[float]]:
    """One ``INSERT`` per row over ``clients`` connections (each takes whole
    chunks from a shared list), a commit every ``commit_every`` rows (1 with
    ``latencies``: then each row's INSERT+COMMIT time is kept). Returns
    ``(wall seconds, per-row latencies in seconds)``."""
    pending = list(chunks)
    lock = threading.Lock()
    times: list[float] = []
    errors: list[BaseException] = []

    def loop() -> None:
        try:
            with psycopg.connect(url) as conn:
                while True:
                    with lock:
                        if not pending or errors:
                            return
                        chunk = pending.pop()
                    with conn.cursor() as cur:
                        for n, row in enumerate(chunk, start=1):
                            started = time.perf_counter()
                            cur.execute(INSERT, row, prepare=True)
                            if latencies or n % commit_every == 0:
                                conn.commit()
                            if latencies:
                                elapsed = time.perf_counter() - started
                                with lock:
                                    times.append(elapsed)
                    conn.commit()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=loop) for _ in range(max(1, clients))]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return time.perf_counter() - started, times


def insert_chunks(histories: Sequence[SubjectHistory], *, tenant: str, size: int) -> list[list[tuple]]:
    """Rows of whole subjects packed into chunks of about ``size`` rows."""
    chunks, current = [], []
    for h in histories:
        current.extend(rows(h.events, tenant=tenant))
        if len(current) >= size:
            chunks.append(current)
            current = []
    if current:
        chunks.append(current)
    return chunks


def lookups(url: str, calls: dict[str, list[tuple]], *, warmup: int = 5) -> dict[str, list[float]]:
    """Run each named lookup of :data:`LOOKUPS` once per parameter tuple in
    ``calls[name]``, fetching every row, on one connection with prepared
    statements. Returns latencies in seconds per name (warm-up dropped)."""
    out: dict[str, list[float]] = {}
    with psycopg.connect(url, autocommit=True) as conn:
        for name, params_list in calls.items():
            sql = LOOKUPS[name]
            times = []
            for n, params in enumerate(params_list):
                started = time.perf_counter()
                conn.execute(sql, params, prepare=True).fetchall()
                if n >= warmup:
                    times.append(time.perf_counter() - started)
            out[name] = times
    return out


def explain(url: str, name: str, params: tuple) -> str:
    """``EXPLAIN (ANALYZE, BUFFERS)`` of one lookup, as text."""
    with psycopg.connect(url, autocommit=True) as conn:
        plan = conn.execute("EXPLAIN (ANALYZE, BUFFERS) " + LOOKUPS[name], params).fetchall()
    return "\n".join(r[0] for r in plan)


__all__ = ["create", "rows", "copy", "insert", "insert_chunks", "lookups", "explain", "LOOKUPS"]
