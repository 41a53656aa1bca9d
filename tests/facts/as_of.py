"""A second, plainer road to the past for the tests: every key of a
subject resolved from the log as known at a transaction time, through the
ORM and the pure resolution function, to check the product's own as-of
read (``facts.queries``) and the stored projection against."""
from __future__ import annotations

from datetime import datetime

from facts.claims import live_claims_by_key
from facts.models import Assertion, FactKey, Subject
from facts.queries import policies_at
from facts.resolve import Claim, Resolution, resolve


def resolve_subject_as_of(*, subject: Subject, known_at: datetime) -> list[tuple[FactKey, list[Claim], Resolution]]:
    """Resolve every key of ``subject`` as it was known at ``known_at``, with
    the policy in force then. Returns ``(key, claims, resolution)`` triples
    in key order."""
    keys = {k.id: k for k in FactKey.objects.filter(tenant_id=subject.tenant_id, subject=subject)}
    grouped = live_claims_by_key(Assertion.objects.filter(tenant_id=subject.tenant_id, fact_key_id__in=keys.keys()),
                                 known_at=known_at)
    policies = policies_at(tenant_id=subject.tenant_id, predicates={k.predicate for k in keys.values()}, at=known_at)
    out = [(keys[key_id], claims, resolve(claims, policies[keys[key_id].predicate]))
           for key_id, claims in grouped.items()]
    out.sort(key=lambda t: (t[0].entity, t[0].predicate, t[0].scope_kind, t[0].scope_key))
    return out
