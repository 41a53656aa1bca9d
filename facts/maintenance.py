"""Planner statistics for the ledger's tables after a bulk write.

A server may run with ``autovacuum = off``; then nothing refreshes the
statistics by itself, and after an import the planner works from the sizes
of an empty store (FINDINGS, "Indexes and plans": the write path's "live
claims of a key" read the whole tenant's payload index until an
``ANALYZE``). The import and rebuild commands call :func:`analyze_ledger`
when they finish.
"""
from __future__ import annotations

from django.db import connections, router

from facts.models import Assertion, Conflict, CurrentFact, Event, FactKey, Subject, WebhookReceipt

LEDGER_MODELS = (Subject, FactKey, Assertion, Event, Conflict, CurrentFact, WebhookReceipt)


def analyze_ledger(models=LEDGER_MODELS) -> list[str]:
    """Run ``ANALYZE`` on the tables of ``models`` (default: the ledger's
    write-heavy tables); return the table names analyzed. ``ANALYZE`` reads
    a fixed-size sample of each table (300 x ``default_statistics_target``
    rows), so its cost does not grow with the store, and it takes a lock
    that lets reads and writes go on."""
    tables = []
    for model in models:
        connection = connections[router.db_for_write(model)]
        table = model._meta.db_table
        with connection.cursor() as cursor:
            cursor.execute(f"ANALYZE {connection.ops.quote_name(table)}")
        tables.append(table)
    return tables
