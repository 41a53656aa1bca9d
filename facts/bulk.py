"""Fewer round trips to PostgreSQL, for the hot paths.

- :func:`insert_rows` / :class:`Writes`: rows go by ``COPY`` or one
  ``INSERT`` fed one JSON array, without building Django model instances or
  preparing each value through its field (both cost more than the rest of
  a batch write), and consecutive statements go in one round trip. Used by
  ``facts/ledger.py`` and the idempotency receipts of ``facts/webhooks.py``.
- :func:`fetch_together`: several statements that return rows in one round
  trip, for the write path's lookups (and its ``INSERT … RETURNING`` of new
  keys) and the as-of read (``facts/queries.py``).
- :class:`Select`: a read of chosen columns of one model with a written
  ``WHERE``, for the hot paths where building and compiling a queryset
  costs more than running it. Django's field converters still apply.
- :class:`PreparedStatements`: the statements of a fixed text that these
  send (and :class:`PreparedCursor`'s hot reads) are prepared once per
  connection and sent as ``EXECUTE``, still several to a round trip.
- :func:`use_compiled_timestamptz_loader`: ``timestamptz`` values are read
  by psycopg's compiled loader, as Django's own loader would read them.
"""
from __future__ import annotations

import functools
import hashlib
import json
import re
import time
import uuid
import weakref
from datetime import date, datetime
from decimal import Decimal
from typing import Any, Sequence

import orjson
import psycopg
from django.conf import settings
from django.core.exceptions import EmptyResultSet
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models import QuerySet
from django.db.models.query import ValuesIterable
from django.utils import timezone

# Below this many rows one multi-row INSERT costs fewer round trips than COPY.
COPY_THRESHOLD = 64


def json_text(value: Any) -> str:
    """JSON text of ``value``: orjson (a tenth of ``json.dumps``' time on
    the small objects of event and projection rows, which a batch writes a
    dozen of per assertion), or ``json.dumps`` for what orjson refuses (an
    integer past 64 bits, a non-string key). For a ``jsonb`` column, which
    stores either text as the same value, and the as-of read's body."""
    try:
        return orjson.dumps(value).decode()
    except TypeError:  # orjson.JSONEncodeError is one
        return json.dumps(value)


def insert_rows(model, objs: list, *, ignore_conflicts: bool = False) -> None:
    """Insert rows in bulk: ``COPY`` for many rows, one ``INSERT … SELECT
    FROM jsonb_populate_recordset`` for a few (a single webhook's rows).

    ``objs`` are model instances, light rows (any object whose ``__dict__``
    holds column attnames, e.g. :class:`types.SimpleNamespace`) or
    ``{attname: value}`` dicts; a column a row leaves out takes the field's
    default (``auto_now`` / ``auto_now_add``: now). An auto-increment
    primary key is left to the database. Values go as
    they are (psycopg adapts UUIDs and aware datetimes), except JSON
    columns, whose values go as JSON text (:func:`json_text`) and are
    stored as ``jsonb`` the way Django's ``JSONField`` stores them
    (``None`` is SQL ``NULL``).

    With ``ignore_conflicts`` a row that breaks a unique constraint is
    skipped (``INSERT … ON CONFLICT DO NOTHING``; never ``COPY``).
    """
    if not objs:
        return
    writes = Writes()
    writes.insert(model, objs, ignore_conflicts=ignore_conflicts)
    writes.send()


class Writes:
    """Statements of one write, sent together: consecutive statements go to
    PostgreSQL in one round trip (several statements in one query string,
    which Django's client-side-binding cursor allows); a ``COPY`` of many
    rows goes on its own, in order. Used by the ledger so that a single
    webhook's event rows, projection delete and projection rows cost one
    round trip, not three."""

    def __init__(self) -> None:
        self._ops: list[tuple] = []  # ("sql", sql, params) | ("copy", sql, rows)

    def execute(self, sql: str, params: list | tuple = ()) -> None:
        """Add one statement (``%s`` placeholders, no trailing semicolon)."""
        self._ops.append(("sql", sql, list(params)))

    def insert(self, model, objs: list, *, ignore_conflicts: bool = False) -> None:
        """Add rows of ``model`` (see :func:`insert_rows`)."""
        if not objs:
            return
        copy_sql, insert_sql, columns = _copy_plan(model)
        now = timezone.now()
        names = [name for name, _, _ in columns]
        rows = []
        for obj in objs:
            values = obj if isinstance(obj, dict) else obj.__dict__
            try:
                row = [values[name] for name in names]
            except KeyError:  # a column left to its default
                row = [values[name] if name in values else _default(field, now) for name, _, field in columns]
            rows.append(row)
        if len(rows) >= COPY_THRESHOLD and not ignore_conflicts:
            # COPY sends every value as text, which PostgreSQL parses as the
            # column's type: a JSON column's value goes as its JSON text,
            # with no adapter object per value.
            json_columns = [n for n, (_, is_json, _) in enumerate(columns) if is_json]
            for row in rows:
                for n in json_columns:
                    if row[n] is not None:
                        row[n] = json_text(row[n])
            self._ops.append(("copy", copy_sql, rows))
            return
        # A few rows: one INSERT whose rows travel as one JSON parameter
        # (encoded in C), not one parameter per value quoted in Python; the
        # statement text stays the same whatever the number of rows.
        payload = _rows_json([dict(zip(names, row)) for row in rows])
        self.execute(insert_sql + (" ON CONFLICT DO NOTHING" if ignore_conflicts else ""), [payload])

    def send(self) -> None:
        """Run everything added, in order, and start afresh."""
        ops, self._ops = self._ops, []
        pending: list[tuple[str, list]] = []
        for kind, sql, payload in ops:
            if kind == "sql":
                pending.append((sql, payload))
                continue
            if pending:
                _send(pending)
                pending = []
            with connections[DEFAULT_DB_ALIAS].cursor() as cursor, cursor.cursor.copy(sql) as copy:
                for row in payload:
                    copy.write_row(row)
        if pending:
            _send(pending)


_copy_plans: dict[type, tuple[str, str, list]] = {}


def _rows_json(rows: list[dict]) -> str:
    """The JSON array of :meth:`Writes.insert`'s few rows (values as
    :func:`_json_default` says), by orjson or, for what it refuses,
    ``json.dumps``."""
    try:
        return orjson.dumps(rows, default=_json_default, option=orjson.OPT_PASSTHROUGH_DATETIME).decode()
    except TypeError:
        return json.dumps(rows, default=_json_default, ensure_ascii=False, separators=(",", ":"))


def _json_default(value: Any) -> Any:
    """JSON for the values psycopg would have adapted: times as ISO 8601
    with their offset, UUIDs and decimals as text (PostgreSQL parses each
    back into the column's type)."""
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, (uuid.UUID, Decimal)):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not a column value")


def _default(field, now) -> Any:
    if getattr(field, "auto_now", False) or getattr(field, "auto_now_add", False):
        return now
    return field.get_default()


def _copy_plan(model) -> tuple[str, str, list[tuple[str, Any, Any]]]:
    """``COPY … FROM STDIN`` and ``INSERT … SELECT`` from one JSON array
    parameter of ``model``, and its columns as ``(attname, is JSON, field)``;
    cached per model."""
    if model not in _copy_plans:
        fields = [f for f in model._meta.concrete_fields
                  if not (f.primary_key and f.get_internal_type() in ("AutoField", "BigAutoField", "SmallAutoField"))]
        quote = connections[DEFAULT_DB_ALIAS].ops.quote_name
        table, names = quote(model._meta.db_table), ", ".join(quote(f.column) for f in fields)
        _copy_plans[model] = (f"COPY {table} ({names}) FROM STDIN",
                              f"INSERT INTO {table} ({names}) SELECT {names} "
                              f"FROM jsonb_populate_recordset(NULL::{table}, %s::jsonb)",
                              [(f.attname, f.get_internal_type() == "JSONField", f)
                               for f in fields])
    return _copy_plans[model]


class Select:
    """``SELECT <fields> FROM <model's table> WHERE <where> [ORDER BY …]
    [FOR UPDATE]``, for :func:`fetch_together` (or :meth:`fetch` alone).

    ``fields`` are attnames (``fact_key_id``); ``where`` is SQL over the
    table's columns with ``%s`` placeholders for ``params`` (a list binds
    as an array: ``col = ANY(%s)``). Rows come back as ``{attname: value}``
    dicts, or as model instances with ``as_model`` (every field then).
    Values pass through the fields' database converters as the ORM's would
    (JSON decoded). The statement text is built once per shape; nothing
    is compiled per call, which on the write path costs more than the
    statement itself. ``Select.NOTHING`` can match nothing and costs no
    statement.
    """

    NOTHING: "Select"
    _shapes: dict[tuple, tuple[str, list[str], list]] = {}

    def __init__(self, model, fields: Sequence[str] = (), where: str = "TRUE", params: Sequence = (), *,
                 order_by: str = "", for_update: bool = False, as_model: bool = False) -> None:
        self.model, self.as_model, self.params = model, as_model, list(params)
        if model is None:
            self.sql, self.names, self.converters = None, [], []
            return
        shape = (model, tuple(fields), where, order_by, for_update, as_model)
        if shape not in Select._shapes:
            Select._shapes[shape] = self._plan(*shape)
        self.sql, self.names, self.converters = Select._shapes[shape]

    @staticmethod
    def _plan(model, fields, where, order_by, for_update, as_model) -> tuple[str, list[str], list]:
        connection = connections[DEFAULT_DB_ALIAS]
        quote = connection.ops.quote_name
        chosen = list(model._meta.concrete_fields) if as_model else [model._meta.get_field(f) for f in fields]
        if not as_model and any(f.attname != name for f, name in zip(chosen, fields)):
            raise ValueError(f"Select takes attnames: {fields}")
        sql = (f"SELECT {', '.join(quote(f.column) for f in chosen)} FROM {quote(model._meta.db_table)} "
               f"WHERE {where}" + (f" ORDER BY {order_by}" if order_by else "") + (" FOR UPDATE" if for_update else ""))
        converters = []
        for n, f in enumerate(chosen):
            col = f.get_col(model._meta.db_table)
            found = connection.ops.get_db_converters(col) + f.get_db_converters(connection)
            if found:
                converters.append((n, col, found))
        return sql, [f.attname for f in chosen], converters

    def convert(self, rows: list) -> list:
        """Raw rows of :attr:`sql` as dicts (or model instances)."""
        if self.converters and rows:
            connection = connections[DEFAULT_DB_ALIAS]
            rows = [list(r) for r in rows]
            for row in rows:
                for n, col, found in self.converters:
                    for conv in found:
                        row[n] = conv(row[n], col, connection)
        if self.as_model:
            return [self.model.from_db(DEFAULT_DB_ALIAS, self.names, row) for row in rows]
        names = self.names
        return [dict(zip(names, row)) for row in rows]

    def fetch(self) -> list:
        """Run alone; the rows as :meth:`convert` gives them."""
        return fetch_together(self)[0]


Select.NOTHING = Select(None)


def fetch_together(*queries: QuerySet | Select | tuple[str, list]) -> list[list]:
    """Run several reads in one round trip (consecutive statements in one
    query string; PostgreSQL runs them in order, each with its own snapshot)
    and return each one's rows, in order.

    A query is a ``QuerySet`` of model instances (returned as instances,
    without ``select_related``), a ``.values()`` ``QuerySet`` (returned as
    dicts), a :class:`Select` (as it says), or raw ``(sql, params)``
    (returned as tuples). Django's field converters apply as they would to
    the querysets on their own; a queryset that can match nothing, and
    ``Select.NOTHING``, cost no statement. A ``Select`` and raw SQL go as
    prepared statements (:class:`PreparedStatements`); a queryset, whose
    text changes with its ``IN`` lists, as compiled.
    """
    plans: list[tuple] = []  # (convert rows, sql or None when it can match nothing, params)
    for query in queries:
        if isinstance(query, tuple):
            plans.append((list, *query))
        elif isinstance(query, Select):
            plans.append((query.convert, query.sql, query.params))
        else:
            compiler = query.query.get_compiler(using=query.db)
            try:
                sql, params = compiler.as_sql()
            except EmptyResultSet:
                sql, params = None, ()
            plans.append((lambda rows, q=query, c=compiler: _convert(q, c, rows), sql, list(params)))
    sent = [(sql, params, not isinstance(query, QuerySet))
            for query, (_, sql, params) in zip(queries, plans) if sql is not None]
    fetched = iter(_send(sent, fetch=True)) if sent else iter(())
    return [[] if sql is None else convert(next(fetched)) for convert, sql, _ in plans]


def _send(statements: Sequence[tuple], *, fetch: bool = False) -> list[list]:
    """Send ``statements`` (``(sql, params)``, or ``(sql, params, may
    prepare)``; one statement each, ``%s`` placeholders) to PostgreSQL in
    one round trip, as one query string (Django's cursor binds on the
    client, so several statements may go together). With ``fetch``, every
    statement returns rows and their lists come back, in order. Statements
    of a fixed text go as ``EXECUTE`` of the statement prepared on the
    connection (:class:`PreparedStatements`)."""
    with PreparedCursor() as cursor:
        cursor.execute_together(statements)
        if not fetch:
            return []
        out = [cursor.fetchall()]
        for _ in statements[1:]:
            cursor.nextset()
            out.append(cursor.fetchall())
        return out


def _connected():
    """Django's default connection, open and usable from this thread (the
    checks Django's own cursors make)."""
    conn = connections[DEFAULT_DB_ALIAS]
    conn.close_if_health_check_failed()
    conn.ensure_connection()
    conn.validate_thread_sharing()
    return conn


class PreparedCursor:
    """A cursor on Django's connection whose statements are prepared on the
    connection on their first use (:class:`PreparedStatements`): the hot
    reads, whose planning costs more than running them, and :func:`_send`.
    ``execute(sql, params)`` takes ``%s`` or ``%(name)s`` placeholders;
    then ``fetchone`` / ``fetchall``. A context manager, like Django's
    cursors."""

    def __init__(self) -> None:
        self._conn = _connected()
        with self._conn.wrap_database_errors:
            self._cursor = self._conn.create_cursor()

    def execute(self, sql: str, params: Sequence | dict = ()) -> None:
        self.execute_together([(sql, params)])

    def execute_together(self, statements: Sequence[tuple]) -> None:
        """Run ``statements`` in one round trip (see :func:`_send`), prepared
        where they may be; the cursor is left on the first one's result
        (then :meth:`nextset`). Django's checks, error classes and query
        log apply as to its own cursors; the log shows the statements
        themselves, not the ``EXECUTE``."""
        conn, cursor = self._conn, self._cursor
        conn.validate_no_broken_transaction()
        prepared = PreparedStatements.of(conn.connection)
        text, params, new = prepared.compose(statements)
        started = time.monotonic()
        try:
            with conn.wrap_database_errors:
                try:
                    cursor.execute(text, params)
                except psycopg.Error as exc:
                    prepared.failed(new, exc)
                    raise
                prepared.done(new)
                for _ in new:  # the PREPAREs' results come first
                    cursor.nextset()
        finally:
            if conn.queries_logged:
                conn.queries_log.append({
                    "sql": ";\n".join(conn.ops.compose_sql(s[0], s[1]) for s in statements),
                    "time": "%.3f" % (time.monotonic() - started),
                })

    def nextset(self) -> None:
        with self._conn.wrap_database_errors:
            self._cursor.nextset()

    def fetchone(self):
        with self._conn.wrap_database_errors:
            return self._cursor.fetchone()

    def fetchall(self) -> list:
        with self._conn.wrap_database_errors:
            return self._cursor.fetchall()

    def close(self) -> None:
        self._cursor.close()

    def __enter__(self) -> "PreparedCursor":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class PreparedStatements:
    """The statements one database session has prepared (SQL ``PREPARE``),
    for :class:`PreparedCursor`.

    A statement may be prepared when its text is fixed (the hot paths'
    ``Select`` shapes, the ledger's statements, the bulk inserts, the hot
    reads; not a compiled ``QuerySet``, whose text changes with its ``IN``
    lists). It is named by a hash of its text and prepared on its first use
    on a session, in the same round trip, with the parameter types
    PostgreSQL infers from the statement; ``EXECUTE`` coerces the values to
    them. PostgreSQL then parses it once per session, not once per request.

    It plans it once too: the sessions run prepared statements on their
    generic plan (``plan_cache_mode=force_generic_plan``, set for every
    connection in ``memoryui/settings.py``; only these statements are
    prepared). Left to choose, PostgreSQL kept planning the write path's
    lookups afresh on every execution, since a plan made for arrays of
    unknown length looks dearer than one made for the one element they
    hold; on a webhook, planning cost it more than running them. Their
    parameters are keys and ids, whose plans do not depend on the values,
    and each text is written so that its generic plan is the one wanted
    (``bench/`` prints them: ``EXPLAIN EXECUTE``).

    ``PREPARE`` is not undone by a rollback, so a statement counts as
    prepared once the round trip that prepared it succeeded, or failed
    after it (a data, constraint, serialisation, lock or cancel error: the
    ``PREPARE`` statements come first). After any other failure this
    session prepares nothing more and sends statements as they are, which
    is always correct. Nothing else may deallocate a session's statements:
    psycopg's own preparing (``prepare_threshold``) stays off, since it
    deallocates every statement of the session on a rollback. At most
    :attr:`LIMIT` statements per session; ``MEMORYUI_PREPARED_STATEMENTS=0``
    turns preparing off.
    """

    LIMIT = 200
    KNOWN_TEXTS = 2000  # statement texts remembered per process; past them, sent as they are
    _forms: dict[str, tuple[str, str, str] | None] = {}  # sql -> (name, PREPARE text, EXECUTE text)
    _sessions: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
    # SQLSTATE classes of errors raised by a statement's execution, not by
    # the PREPARE before it: data, constraint, transaction rollback, object
    # state (lock not available), operator intervention, PL/pgSQL raise.
    _AFTER_PREPARE = ("22", "23", "40", "55", "57", "P0")

    def __init__(self) -> None:
        self.names: set[str] = set()
        self.off = False

    @classmethod
    def of(cls, pg_connection) -> "PreparedStatements":
        """The record of this psycopg connection (a new session starts empty)."""
        found = cls._sessions.get(pg_connection)
        if found is None:
            found = cls._sessions[pg_connection] = cls()
        return found

    @classmethod
    def _form(cls, sql: str) -> tuple[str, str, str] | None:
        if sql not in cls._forms:
            if ";" in sql or len(cls._forms) >= cls.KNOWN_TEXTS:
                return None
            order: list[str] = []  # the placeholders, one per $n: every %s, each %(name)s once

            def number(match: re.Match) -> str:
                token = match.group()
                if token == "%%":
                    return token
                if token == "%s" or token not in order:
                    order.append(token)
                    return f"${len(order)}"
                return f"${order.index(token) + 1}"

            body = _PLACEHOLDERS.sub(number, sql)
            name = "mu_" + hashlib.blake2b(sql.encode(), digest_size=12).hexdigest()
            cls._forms[sql] = (name, f"PREPARE {name} AS {body}",
                               f"EXECUTE {name}({', '.join(order)})" if order else f"EXECUTE {name}")
        return cls._forms[sql]

    def compose(self, statements: Sequence[tuple]) -> tuple[str, list | dict, list[str]]:
        """The query string to send (``PREPARE`` of the statements new to
        this session first), its parameters (a dict only for one statement
        with named placeholders), and the names it prepares."""
        texts: list[str] = []
        params: list = []
        prepares: list[str] = []
        new: list[str] = []
        off = self.off or not settings.MEMORYUI_PREPARED_STATEMENTS
        for statement in statements:
            sql, values = statement[0], statement[1]
            form = None if off or (len(statement) > 2 and not statement[2]) else self._form(sql)
            if form is not None and form[0] not in self.names and form[0] not in new:
                if len(self.names) + len(new) >= self.LIMIT:
                    form = None
                else:
                    new.append(form[0])
                    prepares.append(form[1])
            texts.append(form[2] if form is not None else sql)
            if isinstance(values, dict):
                if len(statements) > 1:
                    raise ValueError("named placeholders only in a statement sent alone")
                params = values  # type: ignore[assignment]
            elif form is None:
                params.extend(values)
            else:
                params.extend(array_text(v) if type(v) is list else v for v in values)
        return ";\n".join(prepares + texts), params, new

    def done(self, new: list[str]) -> None:
        """The round trip that prepared ``new`` succeeded."""
        self.names.update(new)

    def failed(self, new: list[str], exc: "psycopg.Error") -> None:
        """The round trip that was to prepare ``new`` failed with ``exc``."""
        if not new:
            return
        if (exc.sqlstate or "")[:2] in self._AFTER_PREPARE:
            self.names.update(new)
        else:
            self.off = True


_PLACEHOLDERS = re.compile(r"%%|%s|%\((\w+)\)s")


def array_text(values: list) -> str | list:
    """A flat list of strings or of integers as the text of a PostgreSQL
    array (``{"a","b"}``, ``{1,2}``), for an argument of ``EXECUTE``, which
    PostgreSQL reads as the prepared parameter's array type. psycopg
    quotes a list value by value in Python (about 1.4 µs a string; a
    batch's lookups send thousands); orjson writes it in C, and a JSON
    array of such values is that text with braces, unless an element holds
    a character JSON escapes (a quote, a backslash, a control character),
    which the two spell differently. Any other list, or one with such a
    character, is returned as it is."""
    if not values:
        return "{}"
    kind = type(values[0])
    if kind is not str and kind is not int or any(type(v) is not kind for v in values):
        return values
    try:
        text = orjson.dumps(values).decode()
    except TypeError:  # an integer past 64 bits
        return values
    if "\\" in text:
        return values
    return "{" + text[1:-1] + "}"


def _convert(query: QuerySet, compiler, rows: list) -> list:
    """Rows of ``compiler``'s statement as ``query`` would have returned them."""
    converted = compiler.results_iter(results=[rows])
    inner = query.query
    if query._iterable_class is ValuesIterable:
        names = [*inner.extra_select, *inner.values_select, *inner.annotation_select]
        return [dict(zip(names, row)) for row in converted]
    klass_info = compiler.klass_info
    start, end = klass_info["select_fields"][0], klass_info["select_fields"][-1] + 1
    attnames = [f[0].target.attname for f in compiler.select[start:end]]
    model = klass_info["model"]
    return [model.from_db(query.db, attnames, row[start:end]) for row in converted]


def use_compiled_timestamptz_loader(sender, connection, **kwargs) -> None:
    """``connection_created`` receiver: read ``timestamptz`` values on this
    connection with psycopg's compiled loader, then give them Django's
    time zone, as Django's loader does.

    Django 5.2 registers a ``timestamptz`` loader derived from psycopg's
    pure-Python one (to set its time zone), so every timestamp read parses
    in Python: five times the compiled loader's cost, and on a webhook,
    whose reads return a few dozen timestamps, about a twentieth of the web
    process's time (Django ticket #36960; psycopg's compiled loader cannot
    be subclassed). The loader registered here keeps Django's ``timezone``
    attribute, which Django checks on each new cursor, and returns the same
    values. Does nothing on another backend, or where psycopg has no
    compiled loader (its pure-Python build).
    """
    if connection.vendor != "postgresql" or connection.connection is None or psycopg.pq.__impl__ == "python":
        return
    adapters = connection.connection.adapters
    oid = adapters.types["timestamptz"].oid
    django_loader = adapters.get_loader(oid, psycopg.pq.Format.TEXT)
    if django_loader is not None and hasattr(django_loader, "timezone"):
        adapters.register_loader(oid, _compiled_tz_loader(django_loader))


@functools.cache
def _compiled_tz_loader(django_loader: type) -> type:
    """Django's ``timestamptz`` loader class with its parsing done by
    psycopg's compiled loader (one class per Django loader class)."""
    compiled = psycopg.adapters.get_loader(psycopg.adapters.types["timestamptz"].oid, psycopg.pq.Format.TEXT)

    class CompiledTzLoader(django_loader):
        def __init__(self, oid: int, context=None) -> None:
            super().__init__(oid, context)
            self._compiled = compiled(oid, context)

        def load(self, data):
            return self._compiled.load(data).replace(tzinfo=self.timezone)

    return CompiledTzLoader
