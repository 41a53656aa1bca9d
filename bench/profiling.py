"""Where the time goes: queries per assertion on the write path, queries per
read, a sampling profile of a batch, and ``EXPLAIN (ANALYZE, BUFFERS)`` of
the statements the write and read paths run, all on the store as built.

Everything runs in this process against the bench database, through the
same functions the endpoints call. Nothing here changes the product.
"""
from __future__ import annotations

import re
import time
from collections import defaultdict
from contextlib import contextmanager
from datetime import datetime
from typing import Iterator, Sequence

from bench.generate import SubjectHistory

_LITERALS = re.compile(r"'(?:[^']|'')*'|\b\d+(?:\.\d+)?\b")
_IN_LISTS = re.compile(r"IN \((?:%s|\?|[^()]*)\)")


def profile_text(profiler) -> str:
    """The call tree of a finished profiler as plain text, without the
    banner and the "Profile at <path>" line (no machine paths in results)."""
    lines = profiler.output_text(unicode=False, color=False, show_all=False).splitlines()
    start = next((i + 1 for i, line in enumerate(lines) if line.startswith("Profile at")), 0)
    return "\n".join(lines[start:]).strip("\n")


def statement_shape(sql: str) -> str:
    """A statement with literals and IN-lists folded, so that the same query
    with other parameters counts as one shape; cut to 160 characters."""
    shape = _IN_LISTS.sub("IN (...)", _LITERALS.sub("?", sql))
    shape = re.sub(r'SAVEPOINT "[^"]+"', 'SAVEPOINT "?"', shape)
    shape = re.sub(r"SELECT .*? FROM", "SELECT ... FROM", shape, count=1)
    return shape[:160]


def _breakdown(captured: Sequence[dict], per: int) -> list[dict]:
    shapes: dict[str, list[float]] = defaultdict(list)
    for q in captured:
        shapes[statement_shape(q["sql"])].append(float(q.get("time") or 0))
    rows = [{"statement": s, "count": len(t), "per_event": round(len(t) / per, 2), "total_ms": round(sum(t) * 1000, 1)}
            for s, t in shapes.items()]
    return sorted(rows, key=lambda r: -r["total_ms"])


def write_path(*, tenant, histories: Sequence[SubjectHistory], profile: bool = True) -> dict:
    """Send the events of ``histories`` through ``dispatch_once`` (what the
    batch endpoint runs per event), counting queries per event by statement
    shape, then again under pyinstrument when ``profile``. Returns
    ``{"events", "queries_per_event", "seconds_per_event", "statements",
    "profile"}``."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from facts.webhooks import dispatch_once

    events = [e for h in histories for e in h.events]
    half = len(events) // 2
    started = time.perf_counter()
    with CaptureQueriesContext(connection) as ctx, sent_statements() as sent:
        for e in events[:half]:
            dispatch_once(tenant, f"batch:{e.id}", e.envelope, actor="bench:profile")
    seconds = time.perf_counter() - started
    result = {"events": half, "queries_per_event": round(len(ctx.captured_queries) / max(1, half), 2),
              "seconds_per_event": round(seconds / max(1, half), 5),
              "statements": _breakdown(ctx.captured_queries, max(1, half))[:25], "profile": None,
              "plans": sent_plans(sent)}
    if profile:
        from pyinstrument import Profiler

        profiler = Profiler(interval=0.0005)
        profiler.start()
        for e in events[half:]:
            dispatch_once(tenant, f"batch:{e.id}", e.envelope, actor="bench:profile")
        profiler.stop()
        result["profile"] = profile_text(profiler)
    return result


@contextmanager
def sent_statements() -> Iterator[dict[str, tuple[list | dict, bool]]]:
    """Within the block, the statements this process sends to PostgreSQL:
    statement text -> (the parameters of its first use, a list or a dict;
    whether it went prepared). Those :class:`facts.bulk.PreparedCursor`
    sends, prepared or not, and those Django's cursors send (the ORM, raw
    SQL); filled while the block runs."""
    from django.db import connection

    from facts.bulk import PreparedCursor

    sent: dict[str, tuple[list | dict, bool]] = {}
    original = PreparedCursor.execute_together

    def recording(self, statements):
        for statement in statements:
            sent.setdefault(statement[0], (statement[1], len(statement) < 3 or bool(statement[2])))
        return original(self, statements)

    def django_cursor(execute, sql, params, many, context):
        if not many:
            sent.setdefault(sql, (params if params is not None else [], False))
        return execute(sql, params, many, context)

    PreparedCursor.execute_together = recording
    try:
        with connection.execute_wrapper(django_cursor):
            yield sent
    finally:
        PreparedCursor.execute_together = original


def sent_plans(sent: dict[str, tuple[list | dict, bool]]) -> list[dict]:
    """``EXPLAIN (ANALYZE, BUFFERS)`` of every ``SELECT`` in ``sent``
    (:func:`sent_statements`) as it ran, each in a transaction rolled back:
    a prepared statement as ``EXECUTE``, its generic plan (see
    :class:`facts.bulk.PreparedStatements`), any other with its values.
    Each item: ``{"name", "execution_ms", "seq_scans", "plan"}``, named by
    the statement's shape, ``prepared:`` first where it went prepared."""
    from django.db import connection, transaction

    from facts.bulk import PreparedCursor, PreparedStatements

    out = []
    for sql, (params, prepared) in sent.items():
        if not sql.lstrip("( ").upper().startswith("SELECT"):
            continue
        form = PreparedStatements._form(sql) if prepared else None
        with transaction.atomic():
            if form is not None:
                with PreparedCursor() as cursor:
                    cursor.execute(sql, params)  # prepares it on this session, if it is new here
            with connection.cursor() as cursor:
                cursor.execute(f"EXPLAIN (ANALYZE, BUFFERS) {form[2] if form else sql}", params)
                plan = "\n".join(r[0] for r in cursor.fetchall())
            transaction.set_rollback(True)
        out.append(_plan_summary(("prepared: " if form else "") + statement_shape(sql), plan))
    return out


def batch_path(*, tenant, histories: Sequence[SubjectHistory], batch_size: int) -> dict:
    """Send ``histories`` through ``dispatch_batch`` (what the batch
    endpoint runs), ``batch_size`` events per call, counting queries per
    event by statement shape; the second half again under pyinstrument.
    Returns like :func:`write_path`, or ``{"skipped": ...}`` when the
    product has no ``dispatch_batch``."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from facts import webhooks

    dispatch_batch = getattr(webhooks, "dispatch_batch", None)
    if dispatch_batch is None:
        return {"skipped": "facts.webhooks has no dispatch_batch: the batch endpoint runs the per-event path"}
    batches, current = [], []
    for h in histories:
        if current and len(current) + len(h.events) > batch_size:
            batches.append(current)
            current = []
        current.extend({"id": e.id, **e.envelope} for e in h.events)
    if current:
        batches.append(current)
    half = max(1, len(batches) // 2)
    events = sum(len(b) for b in batches[:half])
    started = time.perf_counter()
    with CaptureQueriesContext(connection) as ctx:
        for b in batches[:half]:
            dispatch_batch(tenant, b, actor="bench:profile")
    seconds = time.perf_counter() - started
    result = {"events": events, "batches": half, "queries_per_event": round(len(ctx.captured_queries) / max(1, events), 2),
              "queries_per_batch": round(len(ctx.captured_queries) / half, 1),
              "seconds_per_event": round(seconds / max(1, events), 5),
              "statements": _breakdown(ctx.captured_queries, max(1, events))[:25], "profile": None}
    if batches[half:]:
        from pyinstrument import Profiler

        profiler = Profiler(interval=0.0005)
        profiler.start()
        for b in batches[half:]:
            dispatch_batch(tenant, b, actor="bench:profile")
        profiler.stop()
        result["profile"] = profile_text(profiler)
    return result


def read_queries(*, api_key: str, subject: str, history_key: tuple[str, str, str], valid_at: datetime,
                 known_at: datetime) -> dict:
    """Queries per read endpoint for one subject (in process, Django's test
    client): a count that grows with the subject's keys is an N+1."""
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    client = Client()
    headers = {"Authorization": f"Bearer {api_key}"}
    entity, predicate, scope = history_key
    paths = read_paths(subject=subject, history_key=history_key, valid_at=valid_at, known_at=known_at)
    out = {}
    for name, path in paths.items():
        with CaptureQueriesContext(connection) as ctx:
            response = client.get(path, headers=headers)
        out[name] = {"queries": len(ctx.captured_queries), "status": response.status_code,
                     "statements": _breakdown(ctx.captured_queries, 1)[:8]}
    return out


def read_profile(*, api_key: str, paths: Sequence[str]) -> str:
    """A sampling profile (pyinstrument, text) of GETting ``paths`` in
    process: where a read's time goes besides the database."""
    from django.test import Client
    from pyinstrument import Profiler

    client = Client()
    headers = {"Authorization": f"Bearer {api_key}"}
    profiler = Profiler(interval=0.0005)
    profiler.start()
    for path in paths:
        client.get(path, headers=headers)
    profiler.stop()
    return profile_text(profiler)


def read_paths(*, subject: str, history_key: tuple[str, str, str], valid_at: datetime,
               known_at: datetime) -> dict[str, str]:
    """The API paths of the measured reads for one subject."""
    from urllib.parse import urlencode

    entity, predicate, scope = history_key
    base = f"/api/v1/subjects/{subject}"
    return {
        "facts_now": f"{base}/facts",
        "context": f"{base}/context",
        "history": f"{base}/history?" + urlencode({"entity": entity, "predicate": predicate, "scope": scope}),
        "as_of_valid": f"{base}/facts?" + urlencode({"valid_at": _iso(valid_at)}),
        "as_of_known": f"{base}/facts?" + urlencode({"known_at": _iso(known_at)}),
    }


def _iso(t: datetime) -> str:
    return t.isoformat().replace("+00:00", "Z")


def _plan_summary(name: str, plan: str) -> dict:
    exec_ms = re.search(r"Execution Time: ([\d.]+) ms", plan)
    seq = sorted(set(re.findall(r"Seq Scan on (\w+)", plan)))
    return {"name": name, "execution_ms": float(exec_ms.group(1)) if exec_ms else None, "seq_scans": seq,
            "plan": plan}


