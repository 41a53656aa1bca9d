"""Loading assertions as :class:`~facts.resolve.Claim` s, shared by the
ledger (writes) and the queries (reads). Read-only: it never writes.

``live`` (DESIGN.md, "The resolution function"): recorded at or before T,
not retracted at or before T, not erased.
"""
from __future__ import annotations

from collections import defaultdict
from datetime import datetime

from django.db.models import Q, QuerySet

from facts.models import Assertion
from facts.resolve import Claim

CLAIM_FIELDS = (
    "id", "fact_key_id", "value", "value_key", "valid_from", "valid_to", "stated_at", "recorded_at",
    "source_kind", "source_id", "content_hash",
)


def live_filter(known_at: datetime) -> Q:
    """The ``live(T)`` predicate as a queryset filter."""
    return Q(recorded_at__lte=known_at, erased_at__isnull=True) & (
        Q(retracted_at__isnull=True) | Q(retracted_at__gt=known_at)
    )


LIVE_SQL = "recorded_at <= %s AND erased_at IS NULL AND (retracted_at IS NULL OR retracted_at > %s)"
"""``live(T)`` as SQL over the assertion table's columns (for
:class:`facts.bulk.Select`); its parameters are ``T`` twice."""


def to_claim(row: dict) -> Claim:
    return Claim(
        id=row["id"], value=row["value"], value_key=row["value_key"], valid_from=row["valid_from"],
        valid_to=row["valid_to"], stated_at=row["stated_at"], recorded_at=row["recorded_at"],
        source_kind=row["source_kind"], source_id=row["source_id"], content_hash=row["content_hash"],
    )


def live_claims_by_key(queryset: QuerySet[Assertion], *, known_at: datetime) -> dict[int, list[Claim]]:
    """Group the live assertions of ``queryset`` at ``known_at`` by fact key id."""
    grouped: dict[int, list[Claim]] = defaultdict(list)
    for row in queryset.filter(live_filter(known_at)).values(*CLAIM_FIELDS):
        grouped[row["fact_key_id"]].append(to_claim(row))
    return grouped
