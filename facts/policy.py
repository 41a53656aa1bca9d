"""Predicate policy and source ranking as of a transaction time.

DESIGN.md, "Predicate policy": each tenant registers predicates; a shipped
catalogue gives common ones their defaults; a predicate nobody registered is
admitted as ``many``, ``low`` and marked unclassified. Policy changes are
versioned rows, so the policy at transaction time T is the newest row
recorded at or before T (falling back to the catalogue, then to the
unclassified default).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime

from django.db import connection
from django.utils import timezone

from facts.models import PredicatePolicy, SourceRanking
from facts.resolve import DEFAULT_RANKING, Policy


@dataclass(frozen=True)
class CatalogueEntry:
    cardinality: str
    stakes: str = "low"
    authority: str = "user"
    ttl_seconds: int | None = None


CATALOGUE: dict[str, CatalogueEntry] = {
    "employer": CatalogueEntry("one"),
    "city_of_residence": CatalogueEntry("one"),
    "job_title": CatalogueEntry("one"),
    "speaks_language": CatalogueEntry("many"),
    "pet": CatalogueEntry("many"),
    "note": CatalogueEntry("many"),
    "legal_name": CatalogueEntry("one", "high"),
    "email": CatalogueEntry("one", "high"),
    "billing_address": CatalogueEntry("one", "high", "system_record"),
    "payment_method": CatalogueEntry("one", "high"),
    "plan": CatalogueEntry("one", "low", "system_record"),
}
UNCLASSIFIED = CatalogueEntry("many")


@dataclass(frozen=True)
class PolicyView:
    """A predicate's policy as shown to staff: the rule inputs plus where
    they came from (``tenant``, ``catalogue`` or ``unclassified``)."""

    predicate: str
    cardinality: str
    stakes: str
    authority: str
    ttl_seconds: int | None
    origin: str
    recorded_at: datetime | None

    @property
    def classified(self) -> bool:
        return self.origin != "unclassified"


def ranking_at(*, tenant_id: int, at: datetime) -> tuple[str, ...]:
    """The tenant's source ranking (highest first) in force at ``at``."""
    row = (
        SourceRanking.objects.filter(tenant_id=tenant_id, recorded_at__lte=at)
        .order_by("-recorded_at", "-id")
        .values_list("ranking", flat=True)
        .first()
    )
    return tuple(row) if row else DEFAULT_RANKING


def policy_views_at(*, tenant_id: int, at: datetime, predicates: set[str] | None = None) -> list[PolicyView]:
    """Policies in force at ``at``, sorted by predicate, with their origin,
    in one query. Without ``predicates``: the catalogue plus every predicate
    the tenant registered or had admitted unclassified."""
    rows = PredicatePolicy.objects.filter(tenant_id=tenant_id, recorded_at__lte=at)
    if predicates is not None:
        rows = rows.filter(predicate__in=predicates)
    latest = {r.predicate: r for r in rows.order_by("predicate", "-recorded_at", "-id").distinct("predicate")}
    names = predicates if predicates is not None else set(CATALOGUE) | latest.keys()
    return [_view(name, latest.get(name)) for name in sorted(names)]


def policy_view_at(*, tenant_id: int, predicate: str, at: datetime) -> PolicyView:
    """The predicate's policy in force at ``at``, with its origin."""
    return policy_views_at(tenant_id=tenant_id, at=at, predicates={predicate})[0]


def _view(predicate: str, row: PredicatePolicy | None) -> PolicyView:
    if row is not None:
        return PolicyView(predicate, row.cardinality, row.stakes, row.authority, row.ttl_seconds,
                          "tenant" if row.classified else "unclassified", row.recorded_at)
    entry = CATALOGUE.get(predicate)
    origin = "catalogue" if entry else "unclassified"
    entry = entry or UNCLASSIFIED
    return PolicyView(predicate, entry.cardinality, entry.stakes, entry.authority, entry.ttl_seconds, origin, None)


def _latest_statement(*, tenant_id: int, at: datetime | None, predicates: set[str],
                      with_ranking: bool) -> tuple[str, list]:
    """SQL for the newest policy row at or before ``at`` of each of
    ``predicates`` and, when ``with_ranking``, the ranking in force at
    ``at``: one statement, so that the write path can send it in the same
    round trip as its key lock."""
    policy, ranking = PredicatePolicy._meta.db_table, SourceRanking._meta.db_table
    # at None: the newest committed row when the statement runs (rows are
    # recorded at the server's now, so never in the future).
    until = "" if at is None else " AND recorded_at <= %s"
    sql = (f"(SELECT DISTINCT ON (predicate) predicate, cardinality, stakes, authority, ttl_seconds, NULL::jsonb "
           f"FROM {policy} WHERE tenant_id = %s AND predicate = ANY(%s){until} "
           f"ORDER BY predicate, recorded_at DESC, id DESC)")
    params: list = [tenant_id, sorted(predicates), *([at] if at is not None else [])]
    if with_ranking:
        sql += (f" UNION ALL (SELECT NULL, NULL, NULL, NULL, NULL, ranking FROM {ranking} "
                f"WHERE tenant_id = %s{until} ORDER BY recorded_at DESC, id DESC LIMIT 1)")
        params += [tenant_id, *([at] if at is not None else [])]
    return sql, params


class PolicyCache:
    """Per-call memo of the policy in force: the policies of many predicates
    and the ranking in one query, however many keys are resolved at the
    same ``at``. ``at`` ``None`` means the newest policy when the query runs
    (the write path sends it right after taking its key locks, which a
    policy change must also take before it commits)."""

    def __init__(self, *, tenant_id: int, at: datetime | None) -> None:
        self.tenant_id = tenant_id
        self.at = at
        self._ranking: tuple[str, ...] | None = None
        self._policies: dict[str, Policy] = {}
        # Predicates seen with neither a stored policy nor a catalogue entry.
        self.unregistered: set[str] = set()

    def prefetch(self, predicates: set[str]) -> None:
        """Load the policies of many predicates, and the ranking when not
        yet known, in one query. Predicates with no stored row and no
        catalogue entry are added to :attr:`unregistered`."""
        statement = self.prefetch_statement(predicates)
        if statement is not None:
            with connection.cursor() as cursor:
                cursor.execute(*statement)
                self.load(predicates, cursor.fetchall())

    def prefetch_statement(self, predicates: set[str]) -> tuple[str, list] | None:
        """``(sql, params)`` that :meth:`prefetch` would run for
        ``predicates``, for a caller that sends it with other statements
        (then :meth:`load` its rows); ``None`` when all are known."""
        missing = predicates - self._policies.keys()
        if not missing:
            return None
        return _latest_statement(tenant_id=self.tenant_id, at=self.at, predicates=missing,
                                 with_ranking=self._ranking is None)

    def load(self, predicates: set[str], rows: list[tuple]) -> None:
        """Take the rows of :meth:`prefetch_statement` for ``predicates``."""
        missing = predicates - self._policies.keys()
        found: dict[str, CatalogueEntry] = {}
        stored_ranking = None
        for predicate, cardinality, stakes, authority, ttl_seconds, ranking_row in rows:
            if predicate is None:
                # Django's backend hands jsonb over as text (JSONField parses it).
                stored_ranking = json.loads(ranking_row) if isinstance(ranking_row, str) else ranking_row
            else:
                found[predicate] = CatalogueEntry(cardinality, stakes, authority, ttl_seconds)
        if self._ranking is None:
            self._ranking = tuple(stored_ranking) if stored_ranking else DEFAULT_RANKING
        for predicate in missing:
            entry = found.get(predicate) or CATALOGUE.get(predicate)
            if entry is None:
                self.unregistered.add(predicate)
                entry = UNCLASSIFIED
            self._policies[predicate] = Policy(
                cardinality=entry.cardinality, stakes=entry.stakes, authority=entry.authority,
                ttl_seconds=entry.ttl_seconds, ranking=self.ranking,
            )

    @property
    def ranking(self) -> tuple[str, ...]:
        if self._ranking is None:
            self._ranking = ranking_at(tenant_id=self.tenant_id, at=self.at or timezone.now())
        return self._ranking

    def get(self, predicate: str) -> Policy:
        self.prefetch({predicate})
        return self._policies[predicate]
