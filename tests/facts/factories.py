"""Builders for the pure resolution function's inputs (no database).

``claim()`` makes a :class:`facts.resolve.Claim` the way the ledger would
from a stored assertion: the value key and content hash are derived, never
typed by hand. Times are given as ISO dates (``"2024-03-01"``) and become
timezone-aware UTC datetimes.
"""
from __future__ import annotations

import itertools
from datetime import datetime, timezone
from typing import Any

from facts.resolve import (
    AUTHORITY_SYSTEM_RECORD, AUTHORITY_USER, CARDINALITY_MANY, CARDINALITY_ONE, STAKES_HIGH, STAKES_LOW, Claim,
    Policy, content_hash, normalise_value,
)

_ids = itertools.count(1)


def at(day: str | datetime | None) -> datetime | None:
    """``"2024-03-01"`` (or a full ISO time) -> aware UTC datetime."""
    if day is None or isinstance(day, datetime):
        return day
    parsed = datetime.fromisoformat(day)
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)


def claim(value: Any = "Acme", *, kind: str = "user_statement", valid_from: str | datetime = "2024-01-01",
          valid_to: str | datetime | None = None, stated_at: str | datetime | None = None,
          recorded_at: str | datetime = "2026-01-01", source_id: str | None = None, id: Any = None) -> Claim:
    """One live assertion as the rules see it. ``stated_at`` defaults to
    ``valid_from``, as the admission step does; ``source_id`` and ``id`` are
    unique unless given."""
    n = next(_ids)
    source_id = source_id or f"src-{n}"
    value_key = normalise_value(value)
    return Claim(
        id=id if id is not None else f"a-{n}", value=value, value_key=value_key, valid_from=at(valid_from),
        valid_to=at(valid_to), stated_at=at(stated_at) or at(valid_from), recorded_at=at(recorded_at),
        source_kind=kind, source_id=source_id, content_hash=content_hash(source_id=source_id, value_key=value_key),
    )


ONE = Policy(cardinality=CARDINALITY_ONE)
MANY = Policy(cardinality=CARDINALITY_MANY)
HIGH = Policy(cardinality=CARDINALITY_ONE, stakes=STAKES_HIGH)
SYSTEM_OWNED = Policy(cardinality=CARDINALITY_ONE, authority=AUTHORITY_SYSTEM_RECORD)


def policy(*, cardinality: str = CARDINALITY_ONE, stakes: str = STAKES_LOW, authority: str = AUTHORITY_USER,
           ttl_seconds: int | None = None) -> Policy:
    return Policy(cardinality=cardinality, stakes=stakes, authority=authority, ttl_seconds=ttl_seconds)
