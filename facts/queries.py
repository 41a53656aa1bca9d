"""Reads: facts at (valid_at, known_at), context, history, export.

DESIGN.md, "The read model". The current view (``known_at`` now) is read
from the projection; a past ``known_at`` is recomputed from the log with the
resolution function and the policy of that time, never from today's
projection. Every query is scoped by tenant, so an id of another tenant is
simply not found. Reads never import writes.
"""
from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from typing import Any

from django.db.models import Q
from django.utils import timezone

from facts.claims import CLAIM_FIELDS, live_claims_by_key, to_claim
from facts.errors import NotFound
from facts.models import Assertion, Conflict, CurrentFact, Event, FactKey, Subject, Tenant
from facts.policy import PolicyCache
from facts.projection import iso, rows_for_key, source_info
from facts.resolve import FATE_PROPOSED, SEGMENT_CONFLICT, Claim, Resolution, resolve


def get_subject(*, tenant: Tenant, external_id: str) -> Subject:
    """The tenant's subject with this external id. Raises :class:`NotFound`."""
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
    """A projection row as an API.md fact item."""
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

    ``valid_at`` and ``known_at`` default to now. Returns the API body.
    Raises :class:`NotFound` for an unknown subject.
    """
    now = timezone.now()
    subject = get_subject(tenant=tenant, external_id=external_id)
    valid_at = valid_at or now
    if _is_now(known_at, now):
        rows = current_rows(subject=subject, valid_at=valid_at, entity=entity, predicate=predicate, scope=scope)
        items = [fact_item_from_row(r) for r in sorted(rows, key=_row_order)]
    else:
        items = _facts_as_of(subject=subject, valid_at=valid_at, known_at=known_at,
                             key_q=_key_filter(entity, predicate, scope))
    return {"subject": subject.external_id, "valid_at": iso(valid_at), "known_at": iso(known_at or now),
            "facts": items}


def resolve_subject_as_of(*, subject: Subject, known_at: datetime, key_q: Q = Q()) -> list[tuple[FactKey, list[Claim], Resolution]]:
    """Resolve every key of ``subject`` as it was known at ``known_at``, with
    the policy in force then. Returns ``(key, claims, resolution)`` triples."""
    keys = {k.id: k for k in FactKey.objects.filter(subject=subject).filter(key_q)}
    grouped = live_claims_by_key(Assertion.objects.filter(tenant_id=subject.tenant_id, fact_key_id__in=keys.keys()),
                                 known_at=known_at)
    policies = PolicyCache(tenant_id=subject.tenant_id, at=known_at)
    policies.prefetch({k.predicate for k in keys.values()})
    out = []
    for key_id, claims in grouped.items():
        key = keys[key_id]
        out.append((key, claims, resolve(claims, policies.get(key.predicate))))
    out.sort(key=lambda t: (t[0].entity, t[0].predicate, t[0].scope_kind, t[0].scope_key))
    return out


def _facts_as_of(*, subject: Subject, valid_at: datetime, known_at: datetime, key_q: Q) -> list[dict]:
    """Facts at ``valid_at`` as known at ``known_at``: the projection rows
    that the current view held then, built in memory by the same code that
    builds the stored projection, and shown the same way."""
    resolved = resolve_subject_as_of(subject=subject, known_at=known_at, key_q=key_q)
    holding_ids = {c.id for _, _, res in resolved for seg in res.at(valid_at) for c in (seg.sources or seg.candidates)}
    info = source_info(holding_ids)
    # The conflict that was open at known_at (a tie may have been opened,
    # resolved and opened again; a low-stakes tie is recorded resolved).
    conflicts: dict[int, dict] = defaultdict(dict)
    for c in (Conflict.objects.filter(fact_key_id__in={k.id for k, _, _ in resolved}, opened_at__lte=known_at)
              .filter(Q(resolved_at__isnull=True) | Q(resolved_at__gt=known_at))):
        conflicts[c.fact_key_id][c.valid_from] = c.id
    rows = [row for key, claims, res in resolved
            for row in rows_for_key(key, res, claims, info, conflicts[key.id])
            if row.status in ("value", "conflict") and row.valid_from <= valid_at
            and (row.valid_to is None or valid_at < row.valid_to)]
    return [fact_item_from_row(r) for r in sorted(rows, key=_row_order)]


def _row_order(row: CurrentFact) -> tuple:
    """By key, then by value: one order for the current and as-of paths,
    whatever the database's collation."""
    return (row.entity, row.predicate, row.scope_kind, row.scope_key, row.value_key)


def context(*, tenant: Tenant, external_id: str) -> dict:
    """``GET /api/v1/subjects/<subject>/context``: what an agent may put in a
    prompt now. Exactly one attributed value per single-valued key, never an
    open conflict; keys with a conflict or a pending proposal are listed in
    ``withheld``. Raises :class:`NotFound`."""
    now = timezone.now()
    subject = get_subject(tenant=tenant, external_id=external_id)
    facts, withheld, seen = [], [], set()
    rows = current_rows(subject=subject, valid_at=now)
    # A pending proposal is withheld whatever valid time it starts at.
    pending = (
        CurrentFact.objects.filter(tenant=tenant, subject=subject, status="proposed")
        .values_list("entity", "predicate", "scope_kind", "scope_key")
    )
    proposed = {(e, p, _scope_text(k, s)) for e, p, k, s in pending}
    for row in rows:
        ident = (row.entity, row.predicate, _scope_text(row.scope_kind, row.scope_key))
        if row.status == "conflict":
            withheld.append({"entity": row.entity, "predicate": row.predicate, "scope": ident[2], "reason": "conflict"})
            seen.add(ident)
        elif row.status == "value":
            facts.append({"entity": row.entity, "predicate": row.predicate, "scope": ident[2], "value": row.value,
                          "source_kind": row.source.get("kind"), "since": iso(row.valid_from)})
    for ident in sorted(proposed - seen):
        withheld.append({"entity": ident[0], "predicate": ident[1], "scope": ident[2], "reason": "proposed"})
    return {"subject": subject.external_id, "facts": facts, "withheld": withheld}


# --------------------------------------------------------------------------- history


def history(*, tenant: Tenant, external_id: str, entity: str = "self", predicate: str, scope: tuple[str, str] = ("global", "")) -> dict:
    """``GET /api/v1/subjects/<subject>/history``: the key's versions, oldest
    first, as known now. Every assertion ever received appears in exactly one
    version. Raises :class:`NotFound` (subject or key)."""
    subject = get_subject(tenant=tenant, external_id=external_id)
    key = FactKey.objects.filter(subject=subject, entity=entity, predicate=predicate, scope_kind=scope[0],
                                 scope_key=scope[1]).first()
    if key is None:
        raise NotFound("no such fact key")
    return {"subject": subject.external_id, "entity": key.entity, "predicate": key.predicate, "scope": key.scope,
            "versions": key_versions(key=key)}


def key_versions(*, key: FactKey, now: datetime | None = None) -> list[dict]:
    """The versions of one key (API.md, "history"), oldest first."""
    now = now or timezone.now()
    rows = list(Assertion.objects.filter(fact_key=key).values(
        *CLAIM_FIELDS, "extractor", "evidence", "retracted_at", "erased_at", "retraction_reason"))
    by_id = {r["id"]: r for r in rows}
    live = [to_claim(r) for r in rows if r["erased_at"] is None and (r["retracted_at"] is None or r["retracted_at"] > now)]
    resolution = resolve(live, PolicyCache(tenant_id=key.tenant_id, at=now).get(key.predicate))
    events = defaultdict(list)
    for e in Event.objects.filter(fact_key=key).order_by("at", "id").values("assertion_id", "type", "at", "rule", "actor", "data"):
        events[e["assertion_id"]].append({"type": e["type"], "at": iso(e["at"]), "rule": e["rule"], "actor": e["actor"]})

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
