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
              "prepared_plans": prepared_plans(sent)}
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
def sent_statements() -> Iterator[dict[str, list | dict]]:
    """Within the block, the statements sent through
    :class:`facts.bulk.PreparedCursor` (statement text -> the parameters of
    its first use, a list or a dict), as a dict filled while the block
    runs."""
    from facts.bulk import PreparedCursor

    sent: dict[str, list | dict] = {}
    original = PreparedCursor.execute_together

    def recording(self, statements):
        for statement in statements:
            if not (len(statement) > 2 and not statement[2]):
                sent.setdefault(statement[0], statement[1])
        return original(self, statements)

    PreparedCursor.execute_together = recording
    try:
        yield sent
    finally:
        PreparedCursor.execute_together = original


def prepared_plans(sent: dict[str, list | dict]) -> list[dict]:
    """``EXPLAIN (ANALYZE, BUFFERS) EXECUTE`` of every ``SELECT`` in ``sent``
    (:func:`sent_statements`), each in a transaction rolled back: the plan
    the product's sessions run, its generic plan (see
    :class:`facts.bulk.PreparedStatements`), not the one PostgreSQL would
    make for the statement with its values written in. Each item:
    ``{"name", "execution_ms", "seq_scans", "plan"}``, named ``prepared:``
    and the statement's shape."""
    from django.db import connection, transaction

    from facts.bulk import PreparedCursor, PreparedStatements

    out = []
    for sql, params in sent.items():
        form = PreparedStatements._form(sql)
        if form is None or not sql.lstrip("( ").upper().startswith("SELECT"):
            continue
        with transaction.atomic():
            with PreparedCursor() as cursor:
                cursor.execute(sql, params)  # prepares it on this session, if it is new here
            with connection.cursor() as cursor:
                cursor.execute(f"EXPLAIN (ANALYZE, BUFFERS) {form[2]}", params)
                plan = "\n".join(r[0] for r in cursor.fetchall())
            transaction.set_rollback(True)
        out.append(_plan_summary(f"prepared: {statement_shape(sql)}", plan))
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


def explain_plans(*, tenant, subject: str, history_key: tuple[str, str, str], known_at: datetime) -> list[dict]:
    """``EXPLAIN (ANALYZE, BUFFERS)`` of the write path's per-event lookups
    and of the reads, with real parameters from the store. Each item:
    ``{"name", "execution_ms", "seq_scans", "plan"}``."""
    from django.utils import timezone

    from facts.claims import live_filter
    from facts.models import Assertion, Conflict, CurrentFact, Event, FactKey, PredicatePolicy, Subject, WebhookReceipt
    from django.db import connection

    from facts.queries import current_facts_statement

    subj = Subject.objects.get(tenant=tenant, external_id=subject)
    entity, predicate, scope = history_key
    kind, _, key_part = scope.partition(":")
    key = FactKey.objects.get(subject=subj, entity=entity, predicate=predicate, scope_kind=kind, scope_key=key_part)
    one = Assertion.objects.filter(fact_key=key).values("id", "payload_hash").first()
    now = timezone.now()
    keys = list(FactKey.objects.filter(subject=subj).values_list("id", flat=True))
    ids = list(Assertion.objects.filter(fact_key=key).values_list("id", flat=True))
    receipt = WebhookReceipt.objects.filter(tenant=tenant).values_list("webhook_id", flat=True).first() or "none"
    querysets = {
        "write: duplicate payload check": Assertion.objects.filter(tenant=tenant, payload_hash=one["payload_hash"],
                                                                   erased_at__isnull=True).values_list("id")[:1],
        "write: idempotency receipt": WebhookReceipt.objects.filter(tenant=tenant, webhook_id=receipt)[:1],
        "write: key's live assertions": Assertion.objects.filter(fact_key=key).filter(live_filter(now)),
        "write: key's conflicts": Conflict.objects.filter(fact_key=key).order_by("opened_at"),
        "write: key's projection rows": CurrentFact.objects.filter(fact_key=key),
        "write: source info": Assertion.objects.filter(id__in=ids).values("id", "extractor", "evidence"),
        "write: policy (DISTINCT ON)": PredicatePolicy.objects.filter(
            tenant=tenant, predicate__in=[predicate], recorded_at__lte=now).order_by(
            "predicate", "-recorded_at", "-id").distinct("predicate"),
        "read: as-of known_at (log)": Assertion.objects.filter(tenant_id=tenant.id, fact_key_id__in=keys).filter(
            live_filter(known_at)),
        "read: history events of a key": Event.objects.filter(fact_key=key).order_by("at", "id"),
    }
    out = []
    for name, qs in querysets.items():
        out.append(_plan_summary(name, qs.explain(analyze=True, buffers=True)))
    sql, params = current_facts_statement(tenant_id=tenant.id, external_id=subject, valid_at=now)
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql, params)
        out.append(_plan_summary("read: facts-now (projection, as the API runs it)",
                                 "\n".join(r[0] for r in cursor.fetchall())))
    return out
