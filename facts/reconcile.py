"""Reconciliation of the current-view projection against the log.

DESIGN.md, "The read model": the current view is a projection, rebuilt from
the log on demand and checked by a reconciliation job that compares per-key
hashes, not row counts. For every fact key, the rows the projection holds
are hashed (:func:`facts.projection.rows_digest`) and compared with the rows
a fresh resolution of the key's live assertions would store
(:func:`facts.projection.rows_for_key`). A key whose hashes differ drifts;
with ``repair`` it is rebuilt through the ledger.

A plain function, so that the management command and a periodic task can
both call it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from django.db import transaction
from django.utils import timezone

from facts.claims import CLAIM_FIELDS, live_filter, to_claim
from facts.ledger import rebuild_projection
from facts.models import Assertion, Conflict, CurrentFact, FactKey, Tenant
from facts.policy import PolicyCache
from facts.projection import rows_digest, rows_for_key, source_info
from facts.resolve import resolve


@dataclass(frozen=True)
class KeyDrift:
    """One fact key whose projection differs from the log. Digests are
    SHA-256 hex (:func:`facts.projection.rows_digest`)."""

    fact_key_id: int
    tenant: str
    subject: str
    entity: str
    predicate: str
    scope: str
    stored_digest: str
    expected_digest: str

    def describe(self) -> str:
        """``tenant/subject entity.predicate[scope]``: ids, never values."""
        return f"{self.tenant}/{self.subject} {self.entity}.{self.predicate}[{self.scope}] (key {self.fact_key_id})"


@dataclass
class ReconcileReport:
    """What a run found. ``repaired`` counts keys rebuilt (``repair=True``)."""

    keys_checked: int = 0
    drifting: list[KeyDrift] = field(default_factory=list)
    repaired: int = 0

    @property
    def unrepaired(self) -> int:
        return len(self.drifting) - self.repaired

    def summary(self) -> str:
        return (f"checked {self.keys_checked} keys: {len(self.drifting)} drifting, "
                f"{self.repaired} repaired")


def key_digests(key: FactKey) -> tuple[str, str]:
    """``(stored, expected)`` digests of one key's projection as of now.

    ``expected`` is built from the key's live assertions and the policy in
    force now, with the open conflicts' ids, exactly as the ledger stores
    it. Call inside a transaction holding the key's row lock, so no write
    lands between the two reads.
    """
    now = timezone.now()
    claims = [to_claim(r) for r in Assertion.objects.filter(fact_key=key).filter(live_filter(now)).values(*CLAIM_FIELDS)]
    resolution = resolve(claims, PolicyCache(tenant_id=key.tenant_id, at=now).get(key.predicate))
    conflict_ids = {c.valid_from: c.id for c in Conflict.objects.filter(fact_key=key, status=Conflict.OPEN)}
    expected = rows_for_key(key, resolution, claims, source_info(c.id for c in claims), conflict_ids)
    return rows_digest(CurrentFact.objects.filter(fact_key=key)), rows_digest(expected)


def reconcile(*, tenant: Tenant | None = None, repair: bool = False,
              progress: Callable[[int], None] | None = None) -> ReconcileReport:
    """Compare every key's projection with the log (all tenants, or one).

    Each key is checked in its own short transaction under its row lock, so
    writes elsewhere proceed. With ``repair`` every drifting key is rebuilt
    from the log (:func:`facts.ledger.rebuild_projection`). ``progress`` is
    called with 1 after each key (for a progress bar). Returns a
    :class:`ReconcileReport`; raises nothing for drift.
    """
    report = ReconcileReport()
    keys = FactKey.objects.order_by("pk")
    if tenant is not None:
        keys = keys.filter(tenant=tenant)
    for key_id in keys.values_list("pk", flat=True).iterator():
        with transaction.atomic():
            key = (FactKey.objects.select_for_update(of=("self",)).select_related("tenant", "subject")
                   .filter(pk=key_id).first())
            if key is not None:
                stored, expected = key_digests(key)
                if stored != expected:
                    report.drifting.append(KeyDrift(key.id, key.tenant.slug, key.subject.external_id, key.entity,
                                                    key.predicate, key.scope, stored, expected))
        report.keys_checked += 1
        if progress is not None:
            progress(1)
    if repair and report.drifting:
        report.repaired = rebuild_projection(key_ids=[d.fact_key_id for d in report.drifting])
    return report


def count_keys(*, tenant: Tenant | None = None) -> int:
    """How many fact keys a run over ``tenant`` (or all) will check."""
    keys = FactKey.objects.all()
    return keys.filter(tenant=tenant).count() if tenant is not None else keys.count()
