"""Reads: facts at (valid_at, known_at), context, history, export.

DESIGN.md, "The read model". The current view (``known_at`` now) is read
from the projection; a past ``known_at`` is recomputed from the log with the
resolution function and the policy of that time, never from today's
projection. Every query is scoped by tenant, so an id of another tenant is
simply not found. Reads never import writes.

The API's reads are hot paths (issue 6): they run plain SQL through
``django.db.connection`` with a fixed number of round trips, and the current
view's facts body is built by PostgreSQL. Their results equal the ORM and
Python builders' (tests/facts/test_reads.py). Facts now and context check
the API key in their own statement (one round trip per read) and run as
prepared statements (:class:`facts.bulk.PreparedCursor`).
"""
from __future__ import annotations

import json
from collections import defaultdict, namedtuple
from datetime import datetime
from functools import lru_cache
from typing import Any

from django.db import connection
from django.db.models import Q
from django.utils import timezone

from facts.bulk import PreparedCursor, fetch_together, json_text
from facts.claims import CLAIM_FIELDS, to_claim
from facts.errors import NotFound
from facts.models import (
    Assertion, Conflict, CurrentFact, Event, FactKey, Subject, Tenant,
)
from facts.policy import PolicyCache
from facts.projection import iso, rows_holding_at
from facts.resolve import FATE_PROPOSED, SEGMENT_CONFLICT, Claim, Policy, resolve
from facts.tenants import KEY_COLUMNS, KEY_FROM, KEY_WHERE, KeyCheck


def get_subject(*, tenant: Tenant, external_id: str) -> Subject:
    """The tenant's subject with this external id. Raises :class:`NotFound`
    (also for an id no subject can have: one holding a NUL character)."""
    if "\x00" in external_id:
        raise NotFound("no such subject")
    subject = Subject.objects.filter(tenant=tenant, external_id=external_id).first()
    if subject is None:
        raise NotFound("no such subject")
    return subject


def _key_filter(entity: str | None, predicate: str | None, scope: tuple[str, str] | None, prefix: str = "") -> Q:
    q = Q()
    if entity:
        q &= Q(**{f"{prefix}entity": entity})
    if predicate:
        q &= Q(**{f"{prefix}predicate": predicate})
    if scope:
        q &= Q(**{f"{prefix}scope_kind": scope[0], f"{prefix}scope_key": scope[1]})
    return q


def _scope_text(kind: str, key: str) -> str:
    return kind if kind == "global" else f"{kind}:{key}"


def _is_now(known_at: datetime | None, now: datetime) -> bool:
    return known_at is None or known_at >= now


def current_rows(*, subject: Subject, valid_at: datetime, entity: str | None = None, predicate: str | None = None,
                 scope: tuple[str, str] | None = None, statuses: tuple[str, ...] = ("value", "conflict")):
    """Projection rows of ``subject`` holding at ``valid_at`` (as known now)."""
    return (
        CurrentFact.objects.filter(tenant_id=subject.tenant_id, subject=subject, status__in=statuses,
                                   valid_from__lte=valid_at)
        .filter(Q(valid_to__isnull=True) | Q(valid_to__gt=valid_at))
        .filter(_key_filter(entity, predicate, scope))
        .order_by("entity", "predicate", "scope_kind", "scope_key", "value_key")
    )


def fact_item_from_row(row: CurrentFact) -> dict:
    """A projection row as an API.md fact item. The row's stored ``item``
    column holds the same, built by PostgreSQL (migration facts/0005: a
    change here is a new migration there)."""
    base = {"entity": row.entity, "predicate": row.predicate, "scope": _scope_text(row.scope_kind, row.scope_key),
            "status": row.status, "valid_from": iso(row.valid_from), "valid_to": iso(row.valid_to)}
    if row.status == "conflict":
        return {**base, "candidates": row.candidates, "conflict_id": str(row.conflict_id) if row.conflict_id else None,
                "rule": row.rule}
    source = {k: row.source.get(k) for k in ("kind", "id", "extractor", "evidence")}
    return {**base, "value": row.value, "assertion_id": str(row.assertion_id),
            "asserted_valid_to": iso(row.asserted_valid_to), "stated_at": iso(row.stated_at),
            "recorded_at": iso(row.recorded_at), "source": source, "sources": row.sources, "rule": row.rule}


def facts_at(*, tenant: Tenant, external_id: str, valid_at: datetime | None = None, known_at: datetime | None = None,
             entity: str | None = None, predicate: str | None = None, scope: tuple[str, str] | None = None) -> dict:
    """``GET /api/v1/subjects/<subject>/facts`` (API.md, "Reads").

    ``valid_at`` and ``known_at`` default to now. Returns the API body as a
    dict: ``{"subject", "valid_at", "known_at", "facts": [item]}``, items as
    :func:`fact_item_from_row` gives them, ordered by key then value.
    Raises :class:`NotFound` for an unknown subject.
    """
    now = timezone.now()
    if _is_now(known_at, now):
        return json.loads(_current_facts_json(tenant_id=tenant.id, external_id=external_id, valid_at=valid_at or now,
                                              known_at=known_at or now, entity=entity, predicate=predicate,
                                              scope=scope))
    valid_at = valid_at or now
    subject, items = _facts_as_of(tenant_id=tenant.id, external_id=external_id, valid_at=valid_at,
                                  known_at=known_at, entity=entity, predicate=predicate, scope=scope)
    return {"subject": subject, "valid_at": iso(valid_at), "known_at": iso(known_at), "facts": items}


def facts_at_json(*, tenant: Tenant, external_id: str, valid_at: datetime | None = None,
                  known_at: datetime | None = None, entity: str | None = None, predicate: str | None = None,
                  scope: tuple[str, str] | None = None) -> str:
    """:func:`facts_at` as JSON text, the body the API sends.

    As known now, the body is built by PostgreSQL from the projection in one
    query (subject and rows together) and never decoded in Python; a past
    ``known_at`` is recomputed from the log (:func:`facts_at`). The content
    equals :func:`facts_at`'s (only whitespace differs). Raises
    :class:`NotFound` for an unknown subject."""
    now = timezone.now()
    if _is_now(known_at, now):
        return _current_facts_json(tenant_id=tenant.id, external_id=external_id, valid_at=valid_at or now,
                                   known_at=known_at or now, entity=entity, predicate=predicate, scope=scope)
    return json_text(facts_at(tenant=tenant, external_id=external_id, valid_at=valid_at, known_at=known_at,
                              entity=entity, predicate=predicate, scope=scope))


# --------------------------------------------------------------------------- current view, built in SQL
#
# The current view's items are assembled by PostgreSQL: no model instances,
# no decoding of the JSONB columns, no re-encoding. Each projection row
# carries its fact item as JSON text (column ``item``, kept by a trigger:
# migration facts/0005, which mirrors ``iso``, ``_scope_text`` and
# ``fact_item_from_row`` exactly); tests/facts/test_reads.py proves stored
# and Python-built items equal.


def _iso_sql(column: str) -> str:
    """SQL for ``iso(column)``: RFC 3339 UTC with ``Z``, microseconds only
    when nonzero, NULL for NULL."""
    # One conversion and one to_char (then whole seconds lose ".000000").
    return f"""replace(to_char({column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'), '.000000Z', 'Z')"""

# Code point order, as Python sorts strings (``_row_order``), whatever the
# database's collation.
_ROW_ORDER_SQL = ('f.entity COLLATE "C", f.predicate COLLATE "C", f.scope_kind COLLATE "C", '
                  'f.scope_key COLLATE "C", f.value_key COLLATE "C"')
_HOLDING_SQL = "f.valid_from <= %(at)s AND (f.valid_to IS NULL OR f.valid_to > %(at)s)"


def _key_filter_sql(entity: str | None, predicate: str | None, scope: tuple[str, str] | None,
                    alias: str = "f") -> tuple[str, dict]:
    """``_key_filter`` as SQL conditions (each led by ``AND``) on the table
    ``alias``, and their parameters."""
    sql, params = "", {}
    if entity:
        sql, params["entity"] = sql + f" AND {alias}.entity = %(entity)s", entity
    if predicate:
        sql, params["predicate"] = sql + f" AND {alias}.predicate = %(predicate)s", predicate
    if scope:
        sql += f" AND {alias}.scope_kind = %(scope_kind)s AND {alias}.scope_key = %(scope_key)s"
        params["scope_kind"], params["scope_key"] = scope
    return sql, params


def current_facts_statement(*, tenant_id: int | None = None, external_id: str, valid_at: datetime,
                            entity: str | None = None, predicate: str | None = None,
                            scope: tuple[str, str] | None = None, key: KeyCheck | None = None) -> tuple[str, dict]:
    """``(sql, params)`` of the facts-now query: one row ``(external id,
    items as JSON text)``, none for an unknown subject (the form the
    benchmark explains; the items are the API's).

    With ``key`` instead of ``tenant_id`` the API key is checked in the same
    statement (the form the API runs): one row ``(key id, whether to record
    its use, external id, items)`` for a live key, whose tenant scopes the
    subject (external id NULL for an unknown subject), none for an unknown
    or revoked key."""
    key_sql, params = _key_filter_sql(entity, predicate, scope)
    params.update(external_id=external_id, at=valid_at)
    if key is None:
        params["tenant"] = tenant_id
    else:
        params.update(key.params())
    return _current_facts_sql(key_sql, key is not None), params


@lru_cache(maxsize=None)
def _current_facts_sql(key_sql: str, by_key: bool) -> str:
    """The text of :func:`current_facts_statement` (the same text for the same
    filters, so that it is prepared once)."""
    items = (f"(SELECT string_agg(f.item, ', ' ORDER BY {_ROW_ORDER_SQL}) "
             f'FROM "{CurrentFact._meta.db_table}" f WHERE f.tenant_id = s.tenant_id AND f.subject_id = s.id '
             f"AND f.status IN ('value', 'conflict') AND {_HOLDING_SQL}{key_sql})")
    if not by_key:
        return (f'SELECT s.external_id, {items} FROM "{Subject._meta.db_table}" s '
                "WHERE s.tenant_id = %(tenant)s AND s.external_id = %(external_id)s")
    return (f"SELECT {KEY_COLUMNS}, s.external_id, {items} FROM {KEY_FROM} "
            f'LEFT JOIN "{Subject._meta.db_table}" s ON s.tenant_id = k.tenant_id AND s.external_id = %(external_id)s '
            f"WHERE {KEY_WHERE}")


def _facts_body(subject: str, items: str | None, valid_at: datetime, known_at: datetime) -> str:
    return (f'{{"subject": {json.dumps(subject)}, "valid_at": "{iso(valid_at)}", "known_at": "{iso(known_at)}", '
            f'"facts": [{items or ""}]}}')


def _current_facts_json(*, tenant_id: int, external_id: str, valid_at: datetime, known_at: datetime,
                        entity: str | None, predicate: str | None, scope: tuple[str, str] | None) -> str:
    """The facts body as known now, as JSON text, in one query. The subject
    is looked up by ``(tenant, external_id)`` and the projection rows by
    ``(tenant, subject)``. Raises :class:`NotFound`."""
    with PreparedCursor() as cursor:
        cursor.execute(*current_facts_statement(tenant_id=tenant_id, external_id=external_id, valid_at=valid_at,
                                                entity=entity, predicate=predicate, scope=scope))
        row = cursor.fetchone()
    if row is None:
        raise NotFound("no such subject")
    return _facts_body(row[0], row[1], valid_at, known_at)


def facts_at_json_for_key(*, key: KeyCheck, external_id: str, valid_at: datetime | None = None,
                          known_at: datetime | None = None, entity: str | None = None, predicate: str | None = None,
                          scope: tuple[str, str] | None = None) -> str | None:
    """:func:`facts_at_json` for the holder of the API key ``key``, or
    ``None`` when the key is unknown or revoked (a 401, whatever the
    subject). As known now the key is checked in the facts statement
    itself: one round trip, a second only to record the key's use
    (:meth:`KeyCheck.found`). Raises :class:`NotFound` (unknown subject of
    a live key)."""
    now = timezone.now()
    if not _is_now(known_at, now):
        tenant = key.tenant()
        return None if tenant is None else facts_at_json(
            tenant=tenant, external_id=external_id, valid_at=valid_at, known_at=known_at, entity=entity,
            predicate=predicate, scope=scope)
    valid_at = valid_at or now
    with PreparedCursor() as cursor:
        cursor.execute(*current_facts_statement(external_id=external_id, valid_at=valid_at, entity=entity,
                                                predicate=predicate, scope=scope, key=key))
        row = cursor.fetchone()
    if row is None:
        return None
    key_id, record_use, subject, items = row
    key.found(key_id, record_use)
    if subject is None:
        raise NotFound("no such subject")
    return _facts_body(subject, items, valid_at, known_at or now)


def policies_at(*, tenant_id: int, predicates: set[str], at: datetime) -> dict[str, Policy]:
    """The resolution :class:`~facts.resolve.Policy` of each predicate as it
    stood at transaction time ``at``, in one query (DESIGN.md, "Predicate
    policy"; see :class:`facts.policy.PolicyCache`)."""
    cache = PolicyCache(tenant_id=tenant_id, at=at)
    cache.prefetch(predicates)
    return {p: cache.get(p) for p in predicates}


# Parameters: tenant, subject, key ids, known_at twice. The conflicts open
# at known_at (a tie may have been opened, resolved and opened again; a
# low-stakes tie is recorded resolved).
_OPEN_CONFLICTS_SQL = (
    f'SELECT c.fact_key_id, c.valid_from, c.id FROM "{Conflict._meta.db_table}" c '
    "WHERE c.tenant_id = %s AND c.subject_id = %s AND c.fact_key_id = ANY(%s) AND c.opened_at <= %s "
    "AND (c.resolved_at IS NULL OR c.resolved_at > %s)"
)


def _facts_as_of(*, tenant_id: int, external_id: str, valid_at: datetime, known_at: datetime,
                 entity: str | None, predicate: str | None, scope: tuple[str, str] | None) -> tuple[str, list[dict]]:
    """Facts at ``valid_at`` as known at ``known_at``: the projection rows
    that the current view held then, built in memory by the same code that
    builds the stored projection, and shown the same way. Returns the
    subject's external id and the items. Two queries: the subject, its keys
    and their live assertions (with extractor and evidence); the policy in
    force then and the conflicts open then. Raises :class:`NotFound`."""
    key_sql, params = _key_filter_sql(entity, predicate, scope, alias="k")
    params.update(tenant=tenant_id, external_id=external_id, known_at=known_at, at=known_at)
    keys: dict[int, _KeyRow] = {}
    grouped: dict[int, list[Claim]] = defaultdict(list)
    info: dict[Any, dict] = {}
    with connection.cursor() as cursor:
        cursor.execute(_SUBJECT_LIVE_ASSERTIONS_SQL.format(key_filter=key_sql), params)
        rows = cursor.fetchall()
        if not rows:
            raise NotFound("no such subject")
        subject_id, subject_external_id = rows[0][:2]
        for row in rows:
            key_id = row[2]
            if key_id is None:
                continue
            if key_id not in keys:
                keys[key_id] = _KeyRow(*row[2:_ASSERTION_AT])
            if row[_ASSERTION_AT] is None:
                continue
            (aid, value, value_key, valid_from, valid_to, stated_at, recorded_at, source_kind, source_id, content_hash,
             extractor, evidence) = row[_ASSERTION_AT:]
            grouped[key_id].append(Claim(
                id=aid, value=None if value is None else json.loads(value), value_key=value_key,
                valid_from=valid_from, valid_to=valid_to, stated_at=stated_at, recorded_at=recorded_at,
                source_kind=source_kind, source_id=source_id, content_hash=content_hash))
            info[aid] = {"extractor": extractor, "evidence": evidence}  # what source_json shows
        if not grouped:
            return subject_external_id, []
    predicates = {k.predicate for k in keys.values()}
    policies = PolicyCache(tenant_id=tenant_id, at=known_at)
    policy_rows, conflict_rows = fetch_together(policies.prefetch_statement(predicates), (
        _OPEN_CONFLICTS_SQL, [tenant_id, subject_id, list(grouped), known_at, known_at]))
    policies.load(predicates, policy_rows)
    conflicts: dict[int, dict] = defaultdict(dict)
    for key_id, conflict_valid_from, conflict_id in conflict_rows:
        conflicts[key_id][conflict_valid_from] = conflict_id
    items = []
    for key_id, claims in grouped.items():
        key = keys[key_id]
        resolution = resolve(claims, policies.get(key.predicate))
        items.extend(rows_holding_at(key, resolution, info, conflicts[key_id], valid_at))
    return subject_external_id, [fact_item_from_row(r) for r in sorted(items, key=_row_order)]


_FACT_KEY_ATTNAMES = [f.attname for f in FactKey._meta.concrete_fields]
# A fact key's columns, read-only and cheaper than a model instance.
_KeyRow = namedtuple("_KeyRow", _FACT_KEY_ATTNAMES)
# Where the assertion's columns start in a row of the query below.
_ASSERTION_AT = 2 + len(_FACT_KEY_ATTNAMES)
# The subject, its keys and each key's live(T) assertions (facts/claims.py,
# ``live_filter``) with what ``source_info`` adds; a key without any comes
# once with NULLs, a subject without keys likewise. Keys are joined by
# subject and assertions by key only (the tenant follows from the subject):
# a tenant condition there let the planner scan the whole tenant when its
# statistics predate the tenant (3.8 ms against 0.2 for a new tenant of 330
# assertions, growing with the tenant until autovacuum analyses the table).
_SUBJECT_LIVE_ASSERTIONS_SQL = (
    "SELECT s.id, s.external_id, " + ", ".join(f'k."{f.column}"' for f in FactKey._meta.concrete_fields)
    + ", a.id, a.value, a.value_key, a.valid_from, a.valid_to, a.stated_at, a.recorded_at, a.source_kind, "
    "a.source_id, a.content_hash, a.extractor, a.evidence "
    f'FROM "{Subject._meta.db_table}" s LEFT JOIN "{FactKey._meta.db_table}" k '
    "ON k.subject_id = s.id{key_filter} "
    f'LEFT JOIN "{Assertion._meta.db_table}" a ON a.fact_key_id = k.id '
    "AND a.recorded_at <= %(known_at)s AND a.erased_at IS NULL "
    "AND (a.retracted_at IS NULL OR a.retracted_at > %(known_at)s) "
    "WHERE s.tenant_id = %(tenant)s AND s.external_id = %(external_id)s"
)


def _row_order(row: CurrentFact) -> tuple:
    """By key, then by value: one order for the current and as-of paths,
    whatever the database's collation."""
    return (row.entity, row.predicate, row.scope_kind, row.scope_key, row.value_key)


def context(*, tenant: Tenant, external_id: str) -> dict:
    """``GET /api/v1/subjects/<subject>/context``: what an agent may put in a
    prompt now. Exactly one attributed value per single-valued key, never an
    open conflict; keys with a conflict or a pending proposal are listed in
    ``withheld``. Returns ``{"subject", "facts": [{"entity", "predicate",
    "scope", "value", "source_kind", "since"}], "withheld": [{"entity",
    "predicate", "scope", "reason"}]}``: facts and conflicts in key order,
    then proposals in code point order. One query (subject and projection
    rows together). Raises :class:`NotFound`."""
    with PreparedCursor() as cursor:
        cursor.execute(_CONTEXT_SQL, {"tenant": tenant.id, "external_id": external_id, "at": timezone.now()})
        rows = cursor.fetchall()
    if not rows:
        raise NotFound("no such subject")
    return _context_body(rows)


def context_for_key(*, key: KeyCheck, external_id: str) -> dict | None:
    """:func:`context` for the holder of the API key ``key``, the key checked
    in the same statement; ``None`` when the key is unknown or revoked.
    Raises :class:`NotFound` (unknown subject of a live key)."""
    with PreparedCursor() as cursor:
        cursor.execute(_CONTEXT_FOR_KEY_SQL, {**key.params(), "external_id": external_id, "at": timezone.now()})
        rows = cursor.fetchall()
    if not rows:
        return None
    key.found(rows[0][0], rows[0][1])
    if rows[0][2] is None:
        raise NotFound("no such subject")
    return _context_body([row[2:] for row in rows])


def _context_body(rows: list) -> dict:
    """The context body from rows ``(external id, status, entity, predicate,
    scope_kind, scope_key, value as JSON text, source kind, valid_from as
    API text)`` in key order."""
    facts, withheld, seen, proposed = [], [], set(), set()
    for subject, status, entity, predicate, scope_kind, scope_key, value, source_kind, since in rows:
        if status is None:  # a subject without rows
            continue
        ident = (entity, predicate, _scope_text(scope_kind, scope_key))
        if status == "proposed":
            # A pending proposal is withheld whatever valid time it starts at.
            proposed.add(ident)
        elif status == "conflict":
            withheld.append({"entity": entity, "predicate": predicate, "scope": ident[2], "reason": "conflict"})
            seen.add(ident)
        else:
            facts.append({"entity": entity, "predicate": predicate, "scope": ident[2],
                          "value": None if value is None else json.loads(value), "source_kind": source_kind,
                          "since": since})
    for ident in sorted(proposed - seen):
        withheld.append({"entity": ident[0], "predicate": ident[1], "scope": ident[2], "reason": "proposed"})
    return {"subject": rows[0][0], "facts": facts, "withheld": withheld}


# The subject's rows holding now and its pending proposals; ``value`` comes
# back as JSON text (the backend does not decode JSONB), ``valid_from`` as
# ``iso`` writes it.
_CONTEXT_COLUMNS = ("s.external_id, f.status, f.entity, f.predicate, f.scope_kind, f.scope_key, f.value, "
                    f"f.source->>'kind', {_iso_sql('f.valid_from')}")
_CONTEXT_ROWS = (
    f'LEFT JOIN "{CurrentFact._meta.db_table}" f ON f.tenant_id = s.tenant_id AND f.subject_id = s.id '
    f"AND (f.status = 'proposed' OR (f.status IN ('value', 'conflict') AND {_HOLDING_SQL})) "
)
_CONTEXT_ORDER = " ORDER BY f.entity, f.predicate, f.scope_kind, f.scope_key, f.value_key"
# The subject and its rows: none for no subject, one with NULLs for a
# subject without rows.
_CONTEXT_SQL = (
    f'SELECT {_CONTEXT_COLUMNS} FROM "{Subject._meta.db_table}" s {_CONTEXT_ROWS}'
    "WHERE s.tenant_id = %(tenant)s AND s.external_id = %(external_id)s" + _CONTEXT_ORDER
)
# The same led by the key check: none for an unknown or revoked key, NULLs
# from the external id on for an unknown subject.
_CONTEXT_FOR_KEY_SQL = (
    f"SELECT {KEY_COLUMNS}, {_CONTEXT_COLUMNS} FROM {KEY_FROM} "
    f'LEFT JOIN "{Subject._meta.db_table}" s ON s.tenant_id = k.tenant_id AND s.external_id = %(external_id)s '
    f"{_CONTEXT_ROWS}WHERE {KEY_WHERE}" + _CONTEXT_ORDER
)


# --------------------------------------------------------------------------- history


def history(*, tenant: Tenant, external_id: str, entity: str = "self", predicate: str, scope: tuple[str, str] = ("global", "")) -> dict:
    """``GET /api/v1/subjects/<subject>/history``: the key's versions, oldest
    first, as known now. Every assertion ever received appears in exactly one
    version. Returns ``{"subject", "entity", "predicate", "scope",
    "versions"}`` (versions as :func:`key_versions`). Raises
    :class:`NotFound` (subject or key)."""
    with connection.cursor() as cursor:
        cursor.execute(_HISTORY_SQL, {"tenant": tenant.id, "external_id": external_id, "entity": entity,
                                      "predicate": predicate, "scope_kind": scope[0], "scope_key": scope[1]})
        rows = cursor.fetchall()
    if not rows:
        raise NotFound("no such subject")
    if rows[0][1] is None:
        raise NotFound("no such fact key")
    key = FactKey.from_db(connection.alias, _FACT_KEY_ATTNAMES, rows[0][1:_HISTORY_ASSERTION_AT])
    assertions = [dict(zip(_KEY_ASSERTION_COLUMNS, r[_HISTORY_ASSERTION_AT:]))
                  for r in rows if r[_HISTORY_ASSERTION_AT] is not None]
    return {"subject": rows[0][0], "entity": key.entity, "predicate": key.predicate, "scope": key.scope,
            "versions": key_versions(key=key, assertions=assertions)}


_KEY_ASSERTION_COLUMNS = (*CLAIM_FIELDS, "extractor", "evidence", "retracted_at", "erased_at", "retraction_reason")
_KEY_ASSERTIONS_SQL = (
    "SELECT " + ", ".join(f"a.{c}" for c in _KEY_ASSERTION_COLUMNS)
    + f' FROM "{Assertion._meta.db_table}" a WHERE a.tenant_id = %(tenant)s AND a.fact_key_id = %(key)s'
)
_HISTORY_ASSERTION_AT = 1 + len(_FACT_KEY_ATTNAMES)
# The subject's external id, the key and every assertion of the key (one row
# each; one row with NULLs for a key without any, none for no subject).
_HISTORY_SQL = (
    "SELECT s.external_id, " + ", ".join(f'k."{f.column}"' for f in FactKey._meta.concrete_fields) + ", "
    + ", ".join(f"a.{c}" for c in _KEY_ASSERTION_COLUMNS)
    + f' FROM "{Subject._meta.db_table}" s LEFT JOIN "{FactKey._meta.db_table}" k ON k.tenant_id = s.tenant_id '
    "AND k.subject_id = s.id AND k.entity = %(entity)s AND k.predicate = %(predicate)s "
    "AND k.scope_kind = %(scope_kind)s AND k.scope_key = %(scope_key)s "
    f'LEFT JOIN "{Assertion._meta.db_table}" a ON a.tenant_id = s.tenant_id AND a.fact_key_id = k.id '
    "WHERE s.tenant_id = %(tenant)s AND s.external_id = %(external_id)s"
)
_KEY_EVENTS_SQL = (
    f'SELECT e.assertion_id, e.type, e.at, e.rule, e.actor FROM "{Event._meta.db_table}" e '
    "WHERE e.tenant_id = %(tenant)s AND e.fact_key_id = %(key)s ORDER BY e.at, e.id"
)


def key_versions(*, key: FactKey, now: datetime | None = None, assertions: list[dict] | None = None) -> list[dict]:
    """The versions of one key (API.md, "history"), oldest first: each
    ``{"assertion_id", "value", "valid_from", "valid_to", "stated_at",
    "recorded_at", "status", "rule", "supersedes", "superseded_by",
    "sources", "events"}``. Three queries (assertions, events, policy);
    two when the caller read the key's ``assertions`` already (rows of
    ``_KEY_ASSERTION_COLUMNS``, ``value`` as JSON text)."""
    now = now or timezone.now()
    params = {"tenant": key.tenant_id, "key": key.id}
    with connection.cursor() as cursor:
        if assertions is None:
            cursor.execute(_KEY_ASSERTIONS_SQL, params)
            assertions = [dict(zip(_KEY_ASSERTION_COLUMNS, r)) for r in cursor.fetchall()]
        rows = assertions
        cursor.execute(_KEY_EVENTS_SQL, params)
        event_rows = cursor.fetchall()
    for r in rows:
        if r["value"] is not None:
            r["value"] = json.loads(r["value"])
    by_id = {r["id"]: r for r in rows}
    live = [to_claim(r) for r in rows if r["erased_at"] is None and (r["retracted_at"] is None or r["retracted_at"] > now)]
    resolution = resolve(live, policies_at(tenant_id=key.tenant_id, predicates={key.predicate}, at=now)[key.predicate])
    events = defaultdict(list)
    for assertion_id, type_, at, rule, actor in event_rows:
        events[assertion_id].append({"type": type_, "at": iso(at), "rule": rule, "actor": actor})

    assigned: set = set()
    versions: list[dict] = []

    def source(row: dict, status: str) -> dict:
        return {
            "assertion_id": str(row["id"]), "kind": row["source_kind"], "id": row["source_id"],
            "extractor": row["extractor"], "evidence": row["evidence"], "valid_from": iso(row["valid_from"]),
            "valid_to": iso(row["valid_to"]), "stated_at": iso(row["stated_at"]), "recorded_at": iso(row["recorded_at"]),
            "retracted_at": iso(row["retracted_at"]), "erased_at": iso(row["erased_at"]), "status": status,
            "events": events.get(row["id"], []),
        }

    def add(members: list[dict], *, value: Any, valid_from, valid_to, status: str, rule: str = "") -> None:
        first = min(members, key=lambda r: (r["recorded_at"], str(r["id"])))
        assigned.update(m["id"] for m in members)
        versions.append({
            "assertion_id": str(first["id"]), "value": value, "valid_from": iso(valid_from), "valid_to": iso(valid_to),
            "stated_at": iso(first["stated_at"]), "recorded_at": iso(first["recorded_at"]), "status": status,
            "rule": rule, "supersedes": [], "superseded_by": None,
            "sources": [source(m, status) for m in sorted(members, key=lambda r: (r["recorded_at"], str(r["id"])))],
            "events": sorted((e for m in members for e in events.get(m["id"], [])), key=lambda e: e["at"]),
            "_start": valid_from, "_end": valid_to, "_timeline": True,
        })

    for seg in resolution.segments:
        members = seg.sources if seg.status != SEGMENT_CONFLICT else seg.candidates
        fresh = [by_id[c.id] for c in members if c.id not in assigned]
        if seg.status == SEGMENT_CONFLICT:
            by_value = defaultdict(list)
            for row in fresh:
                by_value[row["value_key"]].append(row)
            for group in by_value.values():
                add(group, value=group[0]["value"], valid_from=seg.valid_from, valid_to=seg.valid_to,
                    status="conflict", rule=seg.rule)
        elif fresh:
            add(fresh, value=seg.value, valid_from=seg.valid_from, valid_to=seg.valid_to,
                status=_version_status(seg.valid_from, seg.valid_to, now), rule=seg.rule)
    _link_supersession(versions)
    leftovers = defaultdict(list)
    for row in rows:
        if row["id"] in assigned:
            continue
        if row["erased_at"] is not None:
            status = "erased"
        elif row["retracted_at"] is not None and row["retracted_at"] <= now:
            status = "retracted"
        elif resolution.fate.get(row["id"]) == FATE_PROPOSED:
            status = "proposed"
        else:
            status = "overruled"
        end = row["valid_to"] if status in ("erased", "retracted") else resolution.end.get(row["id"], row["valid_to"])
        group_key = (status, row["value_key"], row["valid_from"], end) if status != "erased" else (status, row["id"])
        leftovers[group_key].append(row)
    for (status, *_), group in leftovers.items():
        add(group, value=group[0]["value"], valid_from=group[0]["valid_from"],
            valid_to=group[0]["valid_to"] if status in ("erased", "retracted") else resolution.end.get(group[0]["id"]),
            status=status, rule="")
    versions.sort(key=lambda v: (v["_start"], v["recorded_at"]))
    for v in versions:
        for private in ("_start", "_end", "_timeline"):
            v.pop(private)
    return versions


def _version_status(start: datetime, end: datetime | None, now: datetime) -> str:
    if start <= now and (end is None or now < end):
        return "current"
    if start > now:
        return "scheduled"
    return "ended"


def _link_supersession(versions: list[dict]) -> None:
    """Adjacent timeline versions: the later one supersedes the earlier; a
    past version followed by another is ``superseded``."""
    timeline = sorted((v for v in versions if v["_timeline"]), key=lambda v: v["_start"])
    for earlier in timeline:
        successors = [v for v in timeline if earlier["_end"] is not None and v["_start"] == earlier["_end"]
                      and v["value"] != earlier["value"]]
        if successors:
            nxt = successors[0]
            earlier["superseded_by"] = nxt["assertion_id"]
            nxt["supersedes"].append(earlier["assertion_id"])
            if earlier["status"] == "ended":
                earlier["status"] = "superseded"
                for source in earlier["sources"]:
                    source["status"] = "superseded"


# --------------------------------------------------------------------------- export


def export(*, tenant: Tenant, external_id: str) -> dict:
    """``GET /api/v1/subjects/<subject>/export``: everything held about the
    subject, with provenance and history. Erased assertions appear as
    tombstones (no value, no evidence). Raises :class:`NotFound`."""
    subject = get_subject(tenant=tenant, external_id=external_id)
    now = timezone.now()
    keys = list(FactKey.objects.filter(subject=subject).order_by("entity", "predicate", "scope_kind", "scope_key"))
    return {
        "subject": subject.external_id,
        "display_name": subject.display_name,
        "exported_at": iso(now),
        "current": [fact_item_from_row(r) for r in current_rows(subject=subject, valid_at=now)],
        "keys": [
            {"entity": k.entity, "predicate": k.predicate, "scope": k.scope, "versions": key_versions(key=k, now=now)}
            for k in keys
        ],
        "events": [
            {"type": e.type, "at": iso(e.at), "rule": e.rule, "actor": e.actor,
             "assertion_id": str(e.assertion_id) if e.assertion_id else None}
            for e in Event.objects.filter(tenant=tenant, subject=subject).order_by("at", "id")
        ],
    }
