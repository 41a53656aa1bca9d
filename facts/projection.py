"""The current-view projection: how a key's resolution becomes
:class:`~facts.models.CurrentFact` rows, and the per-key digest that
``reconcile`` compares (DESIGN.md, "The read model").

The builders here do not write; ``facts/ledger.py`` stores their rows.
"""
from __future__ import annotations

import functools
import hashlib
import json
from datetime import datetime, timezone
from types import SimpleNamespace
from typing import Any, Iterable

from facts.models import Assertion, CurrentFact, FactKey
from facts.resolve import FATE_PROPOSED, SEGMENT_CONFLICT, Claim, Resolution, Segment

SOURCE_INFO_FIELDS = ("id", "extractor", "evidence", "confidence", "valid_to", "valid_from_precision")


def iso(value: datetime | None) -> str | None:
    """RFC 3339 UTC with ``Z``, or ``None``.

    A write spells the same few times over and over (every source in every
    projection row and domain event gives four), so UTC times, which is
    what inputs, the database and the clock give, are spelled once each
    (:func:`_iso_utc`). Another offset is spelled as it stands: equal
    instants in two zones are equal keys, but not the same text."""
    if value is None:
        return None
    if value.tzinfo is timezone.utc:
        return _iso_utc(value)
    return value.isoformat().replace("+00:00", "Z")


@functools.lru_cache(maxsize=4096)
def _iso_utc(value: datetime) -> str:
    return value.isoformat().replace("+00:00", "Z")


def source_info(assertion_ids: Iterable) -> dict[Any, dict]:
    """Extractor, evidence and asserted bounds of assertions, by id."""
    return {row["id"]: row for row in Assertion.objects.filter(id__in=list(assertion_ids)).values(*SOURCE_INFO_FIELDS)}


def source_json(claim: Claim, info: dict) -> dict:
    """A source as API.md shows it, with its own assertion id and times."""
    extra = info.get(claim.id, {})
    return {
        "assertion_id": str(claim.id),
        "kind": claim.source_kind,
        "id": claim.source_id,
        "extractor": extra.get("extractor", ""),
        "evidence": extra.get("evidence", ""),
        "valid_from": iso(claim.valid_from),
        "valid_to": iso(claim.valid_to),
        "stated_at": iso(claim.stated_at),
        "recorded_at": iso(claim.recorded_at),
    }


def candidate_json(claim: Claim, info: dict) -> dict:
    return {"assertion_id": str(claim.id), "value": claim.value, "source": source_json(claim, info)}


def rows_for_key(
    key: FactKey, resolution: Resolution, claims: list[Claim], info: dict, conflict_ids: dict[datetime, Any]
) -> list[SimpleNamespace]:
    """The projection rows of one key: one per segment, one per proposal.

    ``conflict_ids`` maps a conflict segment's ``valid_from`` to its
    :class:`~facts.models.Conflict` id. Light rows: plain objects with every
    :class:`~facts.models.CurrentFact` column as an attribute (the ledger
    stores them by ``COPY``; model instances cost more to create than the
    rest of a write).
    """
    common = _common(key)
    rows = [SimpleNamespace(**common, **_segment_fields(seg, info, conflict_ids)) for seg in resolution.segments]
    for claim in claims:
        if resolution.fate.get(claim.id) == FATE_PROPOSED:
            rows.append(SimpleNamespace(
                **common, status="proposed", conflict_id=None, value=claim.value, value_key=claim.value_key,
                valid_from=claim.valid_from, valid_to=claim.valid_to, asserted_valid_to=claim.valid_to,
                assertion_id=claim.id, stated_at=claim.stated_at, recorded_at=claim.recorded_at,
                source=source_json(claim, info), sources=[source_json(claim, info)], candidates=[],
                rule="high-stakes-confirmation",
            ))
    return rows


def rows_holding_at(key: FactKey, resolution: Resolution, info: dict, conflict_ids: dict[datetime, Any],
                    valid_at: datetime) -> list[SimpleNamespace]:
    """The ``value`` and ``conflict`` rows of one key that hold at
    ``valid_at``: those of :func:`rows_for_key` whose valid interval contains
    ``valid_at``, built without the rest (an as-of read shows no others).

    Read-only rows: plain objects with :class:`~facts.models.CurrentFact`'s
    attributes and the same content (the same builder fills both), not model
    instances, which cost more to create than the rest of the read."""
    common = _common(key)
    return [SimpleNamespace(**common, **_segment_fields(seg, info, conflict_ids))
            for seg in resolution.segments if seg.contains(valid_at)]


def _common(key: FactKey) -> dict:
    return dict(
        tenant_id=key.tenant_id, subject_id=key.subject_id, fact_key_id=key.id, entity=key.entity,
        predicate=key.predicate, scope_kind=key.scope_kind, scope_key=key.scope_key,
    )


def _segment_fields(seg: Segment, info: dict, conflict_ids: dict) -> dict:
    """A segment's projection columns besides the key's."""
    if seg.status == SEGMENT_CONFLICT:
        return dict(
            status="conflict", value=None, value_key="", valid_from=seg.valid_from, valid_to=seg.valid_to,
            asserted_valid_to=None, assertion_id=None, stated_at=None, recorded_at=None, source={}, sources=[],
            candidates=[candidate_json(c, info) for c in seg.candidates], rule=seg.rule,
            conflict_id=conflict_ids.get(seg.valid_from),
        )
    winner = seg.winner
    sources = [source_json(c, info) for c in seg.sources]
    return dict(
        status="value", value=seg.value, value_key=seg.value_key, valid_from=seg.valid_from,
        valid_to=seg.valid_to, asserted_valid_to=winner.valid_to, assertion_id=winner.id,
        stated_at=winner.stated_at, recorded_at=winner.recorded_at,
        # The winner leads its sources (facts.resolve ranks them): built once.
        source=sources[0] if seg.sources and seg.sources[0] is winner else source_json(winner, info),
        sources=sources, candidates=[], rule=seg.rule, conflict_id=None,
    )


# Every column a read returns, so that no edit behind the ledger's back goes
# unnoticed (a changed ``value`` with an intact ``value_key`` included).
_DIGEST_FIELDS = (
    "entity", "predicate", "scope_kind", "scope_key", "status", "value", "value_key", "valid_from", "valid_to",
    "asserted_valid_to", "assertion_id", "stated_at", "recorded_at", "source", "sources", "candidates", "rule",
    "conflict_id",
)


def rows_digest(rows: Iterable[CurrentFact]) -> str:
    """SHA-256 hex over a key's projection rows: their content, not their
    count (DESIGN.md, "The read model": reconciliation compares per-key
    hashes). Order-independent; stored rows and freshly built ones of the
    same content give the same digest."""
    encoded = sorted(
        json.dumps([_jsonable(getattr(r, f)) for f in _DIGEST_FIELDS], sort_keys=True, default=str) for r in rows
    )
    return hashlib.sha256("\n".join(encoded).encode()).hexdigest()


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return iso(value)
    if value is None:
        return None
    if isinstance(value, (list, dict, str, int, float, bool)):
        return value
    return str(value)
