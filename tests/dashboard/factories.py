"""Factories for dashboard tests that need many memories fast: a fact key,
its assertion and the matching projection row, built in bulk. They write
what the ledger would write for a fresh ``note`` about one entity (one
assertion, one current segment), without its per-write recomputation."""
from __future__ import annotations

import hashlib
import uuid
from datetime import datetime, timezone

import factory

from facts.models import Assertion, CurrentFact, FactKey, Subject
from facts.projection import source_json
from facts.resolve import Claim, content_hash, normalise_value

SINCE = datetime(2023, 5, 8, 13, 56, tzinfo=timezone.utc)


class FactKeyFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = FactKey

    subject = None
    tenant = factory.LazyAttribute(lambda o: o.subject.tenant)
    entity = factory.Sequence(lambda n: f"topic-{n}")
    predicate = "note"
    scope_kind = "global"
    scope_key = ""


def projected_memories(*, subject: Subject, count: int, kind: str = "user_statement") -> list[Assertion]:
    """``count`` notes about distinct entities, each one assertion with its
    current projection row, inserted with three bulk statements."""
    keys = FactKey.objects.bulk_create(FactKeyFactory.build_batch(count, subject=subject))
    now = datetime.now(timezone.utc)
    assertions, rows = [], []
    for i, key in enumerate(keys):
        value = f"Memory number {i} about {key.entity}"
        source_id = f"bulk-{uuid.uuid4().hex}"
        a = Assertion(
            id=uuid.uuid4(), tenant_id=subject.tenant_id, subject=subject, fact_key=key, value=value,
            value_key=normalise_value(value), valid_from=SINCE, stated_at=SINCE, recorded_at=now, source_kind=kind,
            source_id=source_id, extractor="bulk@1", evidence=f"I told you about {key.entity}",
            content_hash=content_hash(source_id=source_id, value_key=normalise_value(value)),
            payload_hash=hashlib.sha256(source_id.encode()).hexdigest(), actor="test")
        claim = Claim(a.id, value, a.value_key, SINCE, None, SINCE, now, kind, source_id, a.content_hash)
        info = {a.id: {"extractor": a.extractor, "evidence": a.evidence}}
        assertions.append(a)
        rows.append(CurrentFact(
            tenant_id=subject.tenant_id, subject=subject, fact_key=key, entity=key.entity, predicate="note",
            scope_kind="global", scope_key="", status="value", value=value, value_key=a.value_key, valid_from=SINCE,
            valid_to=None, asserted_valid_to=None, assertion_id=a.id, stated_at=SINCE, recorded_at=now,
            source=source_json(claim, info), sources=[source_json(claim, info)], candidates=[],
            rule="cardinality-many"))
    Assertion.objects.bulk_create(assertions)
    CurrentFact.objects.bulk_create(rows)
    return assertions
