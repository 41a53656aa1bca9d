"""Filling the store up to a size before ingest is measured at that size.

Three ways, chosen with ``--preload`` and named in the report:

- ``batch``: through the product's batch endpoint over HTTP (the real path;
  as slow as the write path is).
- ``ledger``: in this process through ``facts.webhooks.dispatch_once``, the
  function the batch endpoint calls per event (the write path without HTTP).
- ``tables``: straight into the ledger's tables, each key resolved once
  by ``facts.resolve.resolve`` over all its claims and projected by
  ``facts.projection.rows_for_key``. The resolution is order-independent
  (DESIGN.md invariants), so the projection is the one the write path
  would have built; the event log gets one ``fact.asserted`` /
  ``fact.retracted`` row per event (rule ``preloaded``), every assertion
  its idempotency receipt, and conflicts their rows, but no domain events
  are published (no prompts, no outgoing webhooks). Only fast enough for
  1M today.

Measured ingest always goes through HTTP, whatever preloaded the store.
"""
from __future__ import annotations

import uuid
from collections import defaultdict
from typing import Sequence

from django.db import transaction
from django.utils import timezone

from bench.generate import SubjectHistory

MODES = ("tables", "ledger", "batch")


def register_predicates(*, tenant, predicates: dict[str, dict]) -> None:
    """Register predicate policies through the ledger (the same function as
    ``PUT /api/v1/predicates/<name>``)."""
    from facts import ledger

    for name, policy in predicates.items():
        ledger.set_predicate_policy(tenant=tenant, predicate=name, actor="bench", **policy)


def load_ledger(*, tenant, histories: Sequence[SubjectHistory]) -> dict:
    """Send every event through ``dispatch_once`` in this process, subject
    by subject. Returns ``{"events", "refused"}``."""
    from facts.webhooks import dispatch_once

    events = refused = 0
    for h in histories:
        for e in h.events:
            status, _ = dispatch_once(tenant, f"batch:{e.id}", e.envelope, actor="bench:preload")
            events += 1
            refused += status != 200
    return {"events": events, "refused": refused}


def load_tables(*, tenant, histories: Sequence[SubjectHistory], chunk_subjects: int = 200) -> dict:
    """Write ``histories`` straight into the ledger's tables (see the module
    docstring), ``chunk_subjects`` subjects per transaction; each chunk's
    ``recorded_at`` is the clock when it is written. Returns ``{"events",
    "assertions", "keys"}``."""
    totals = {"events": 0, "assertions": 0, "keys": 0}
    for start in range(0, len(histories), chunk_subjects):
        part = _load_chunk(tenant=tenant, histories=histories[start:start + chunk_subjects])
        for k in totals:
            totals[k] += part[k]
    return totals


def _load_chunk(*, tenant, histories: Sequence[SubjectHistory]) -> dict:
    from facts.bulk import insert_rows
    from facts.inputs import parse_assertion
    from facts.models import (Assertion, Conflict, CurrentFact, Event, FactKey, Subject, WebhookReceipt,
                              new_assertion_id)
    from facts.policy import PolicyCache
    from facts.projection import rows_for_key
    from facts.resolve import RULE_TIE_CONFLICT, Claim, resolve

    now = timezone.now()
    actor = "bench:preload"
    with transaction.atomic():
        names = [h.subject for h in histories]
        Subject.objects.bulk_create([Subject(tenant=tenant, external_id=n) for n in names], ignore_conflicts=True)
        subject_ids = dict(Subject.objects.filter(tenant=tenant, external_id__in=names).values_list("external_id", "id"))

        parsed = []  # (event, AssertionInput)
        retracted: dict[tuple[str, str], str] = {}  # (subject, source_id) -> retraction event id
        for h in histories:
            for e in h.events:
                if e.asserts:
                    parsed.append((e, parse_assertion(e.envelope["data"], received_at=now)))
                else:
                    d = e.envelope["data"]
                    retracted[(d["subject"], d["source_id"])] = e.id

        key_names = {(subject_ids[a.subject], a.entity, a.predicate, a.scope_kind, a.scope_key) for _, a in parsed}
        FactKey.objects.bulk_create(
            [FactKey(tenant=tenant, subject_id=s, entity=en, predicate=p, scope_kind=k, scope_key=sk)
             for s, en, p, k, sk in sorted(key_names)], ignore_conflicts=True)
        keys = {(k.subject_id, k.entity, k.predicate, k.scope_kind, k.scope_key): k
                for k in FactKey.objects.filter(tenant=tenant, subject_id__in=subject_ids.values())}

        assertions, events, receipts, claims_by_key = [], [], [], defaultdict(list)
        info = {}
        by_source: dict[tuple[str, str], list] = defaultdict(list)
        for e, a in parsed:
            key = keys[(subject_ids[a.subject], a.entity, a.predicate, a.scope_kind, a.scope_key)]
            aid = new_assertion_id()
            gone = (a.subject, a.source_id) in retracted
            assertions.append(dict(
                id=aid, tenant_id=tenant.id, subject_id=key.subject_id, fact_key_id=key.id, value=a.value,
                value_key=a.value_key,
                valid_from=a.valid_from, valid_to=a.valid_to, valid_from_precision=a.valid_from_precision,
                stated_at=a.stated_at, recorded_at=now, source_kind=a.source_kind, source_id=a.source_id,
                extractor=a.extractor, confidence=a.confidence, evidence=a.evidence, content_hash=a.content_hash,
                payload_hash=a.payload_hash, actor=actor, retracted_at=now if gone else None,
                retraction_reason="wrong person" if gone else "", retracted_by=actor if gone else "",
            ))
            by_source[(a.subject, a.source_id)].append((aid, key))
            events.append(dict(tenant_id=tenant.id, subject_id=key.subject_id, fact_key_id=key.id, assertion_id=aid,
                               type="fact.asserted", rule="preloaded", actor=actor, payload_hash=a.payload_hash,
                               data={"outcome": "preloaded", "source_kind": a.source_kind}, at=now))
            receipts.append(dict(tenant_id=tenant.id, webhook_id=f"batch:{e.id}", status_code=200,
                                 response={"assertion_id": str(aid), "outcome": "preloaded"}))
            info[aid] = {"id": aid, "extractor": a.extractor, "evidence": a.evidence, "confidence": a.confidence,
                         "valid_to": a.valid_to, "valid_from_precision": a.valid_from_precision}
            if not gone:
                claims_by_key[key.id].append(Claim(aid, a.value, a.value_key, a.valid_from, a.valid_to, a.stated_at,
                                                   now, a.source_kind, a.source_id, a.content_hash))
        for (subject, source_id), event_id in retracted.items():
            for aid, key in by_source.get((subject, source_id), []):
                events.append(dict(tenant_id=tenant.id, subject_id=key.subject_id, fact_key_id=key.id, assertion_id=aid,
                                   type="fact.retracted", rule="retraction", actor=actor,
                                   data={"reason_given": True, "batch_id": None}, at=now))
            receipts.append(dict(tenant_id=tenant.id, webhook_id=f"batch:{event_id}", status_code=200,
                                 response={"outcome": "retracted"}))

        policies = PolicyCache(tenant_id=tenant.id, at=now)
        by_id = {k.id: k for k in keys.values()}
        policies.prefetch({k.predicate for k in by_id.values()})
        projection, conflicts = [], []
        touched = {key.id for _, key in (pair for pairs in by_source.values() for pair in pairs)}
        # Subject by subject, as the batch endpoint writes a batch of whole
        # subjects: each subject's projection rows lie together on disk.
        for key_id in sorted(touched, key=lambda k: (by_id[k].subject_id, k)):
            key = by_id[key_id]
            claims = claims_by_key.get(key_id, [])
            resolution = resolve(claims, policies.get(key.predicate))
            conflict_ids = {}
            for start, rule, tied in resolution.ties:
                cid = uuid.uuid4()
                is_open = rule == RULE_TIE_CONFLICT
                conflicts.append(dict(
                    id=cid, tenant_id=tenant.id, subject_id=key.subject_id, fact_key_id=key.id, valid_from=start,
                    status=Conflict.OPEN if is_open else Conflict.RESOLVED, stakes=resolution.policy.stakes,
                    candidate_ids=sorted(str(c.id) for c in tied), opened_at=now,
                    resolved_at=None if is_open else now, resolution_rule="" if is_open else rule,
                    resolved_by="" if is_open else "rule"))
                if is_open:
                    conflict_ids[start] = cid
            projection.extend(rows_for_key(key, resolution, claims, info, conflict_ids))

        CurrentFact.objects.filter(fact_key_id__in=touched).delete()
        for model, objs in ((Assertion, assertions), (Event, events), (WebhookReceipt, receipts),
                            (Conflict, conflicts), (CurrentFact, projection)):
            insert_rows(model, objs)
    return {"events": sum(len(h.events) for h in histories), "assertions": len(assertions), "keys": len(touched)}
