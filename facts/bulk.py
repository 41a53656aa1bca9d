"""Bulk inserts for the write path: rows go to PostgreSQL by ``COPY`` or
one multi-row ``INSERT``, without building Django model instances or
preparing each value through its field (both cost more than the rest of a
batch write). Used by ``facts/ledger.py`` and the idempotency receipts of
``facts/webhooks.py``.
"""
from __future__ import annotations

from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections
from django.utils import timezone
from psycopg.types.json import Jsonb

# Below this many rows one multi-row INSERT costs fewer round trips than COPY.
COPY_THRESHOLD = 64


def insert_rows(model, objs: list, *, ignore_conflicts: bool = False) -> None:
    """Insert rows in bulk: ``COPY`` for many rows, one multi-row ``INSERT``
    for a few (a single webhook's rows).

    ``objs`` are model instances, light rows (any object whose ``__dict__``
    holds column attnames, e.g. :class:`types.SimpleNamespace`) or
    ``{attname: value}`` dicts; a column a row leaves out takes the field's
    default (``auto_now`` / ``auto_now_add``: now). An auto-increment
    primary key is left to the database. Values go as
    they are (psycopg adapts UUIDs and aware datetimes), except JSON
    columns, which are wrapped as ``jsonb`` the way Django's ``JSONField``
    stores them (``None`` is SQL ``NULL``).

    With ``ignore_conflicts`` a row that breaks a unique constraint is
    skipped (``INSERT … ON CONFLICT DO NOTHING``; never ``COPY``).
    """
    if not objs:
        return
    copy_sql, insert_sql, columns = _copy_plan(model)
    rows = []
    now = timezone.now()
    for obj in objs:
        values = obj if isinstance(obj, dict) else obj.__dict__
        row = []
        for name, wrap, field in columns:
            value = values[name] if name in values else _default(field, now)
            row.append(value if wrap is None or value is None else wrap(value))
        rows.append(row)
    conn = connections[DEFAULT_DB_ALIAS]  # the connection itself, not the thread-local proxy, in the hot loop
    with conn.cursor() as cursor:
        if len(rows) < COPY_THRESHOLD or ignore_conflicts:
            one = "(" + ", ".join(["%s"] * len(columns)) + ")"
            sql = insert_sql + ", ".join([one] * len(rows)) + (" ON CONFLICT DO NOTHING" if ignore_conflicts else "")
            cursor.execute(sql, [v for row in rows for v in row])
            return
        with cursor.cursor.copy(copy_sql) as copy:
            for row in rows:
                copy.write_row(row)


_copy_plans: dict[type, tuple[str, str, list]] = {}


def _default(field, now) -> Any:
    if getattr(field, "auto_now", False) or getattr(field, "auto_now_add", False):
        return now
    return field.get_default()


def _copy_plan(model) -> tuple[str, str, list[tuple[str, Any, Any]]]:
    """``COPY … FROM STDIN`` and ``INSERT … VALUES`` (without the rows) of
    ``model``, and its columns as ``(attname, wrap, field)``; cached per
    model."""
    if model not in _copy_plans:
        fields = [f for f in model._meta.concrete_fields
                  if not (f.primary_key and f.get_internal_type() in ("AutoField", "BigAutoField", "SmallAutoField"))]
        quote = connections[DEFAULT_DB_ALIAS].ops.quote_name
        table, names = quote(model._meta.db_table), ", ".join(quote(f.column) for f in fields)
        _copy_plans[model] = (f"COPY {table} ({names}) FROM STDIN", f"INSERT INTO {table} ({names}) VALUES ",
                              [(f.attname, Jsonb if f.get_internal_type() == "JSONField" else None, f)
                               for f in fields])
    return _copy_plans[model]
