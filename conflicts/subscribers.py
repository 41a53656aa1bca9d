"""How ``conflicts/`` hears the ledger (CONVENTIONS.md: ``facts/`` publishes
domain events; ``conflicts/`` subscribes and answers through the ledger).

Subscribers run synchronously inside the ledger's transaction, so the
outbox rows and prompt changes they write commit or roll back with the
change; tasks are scheduled on commit. Connected once, from
``ConflictsConfig.ready()``.
"""
from __future__ import annotations

from datetime import datetime

from conflicts import actions, outbox
from conflicts.models import ClarificationPrompt
from conflicts.queries import key_resolution
from facts import events as ev
from facts.inputs import parse_time
from facts.models import Assertion, FactKey
from facts.resolve import SEGMENT_VALUE
from facts.webhooks import register_handler


def on_domain_event(event: ev.DomainEvent) -> None:
    """React to one ledger event: prompts, review tasks, then the outbox."""
    data = event.data
    if event.type == ev.CONFLICT_OPENED:
        actions.schedule_conflict_prompt(tenant_id=event.tenant_id, conflict_id=data["conflict_id"], stakes=data["stakes"])
    elif event.type == ev.CONFLICT_RESOLVED:
        actions.withdraw_prompts(conflict_id=data["conflict_id"], reason=f"resolved: {data.get('rule', '')}")
    elif event.type == ev.PROPOSAL_OPENED:
        actions.schedule_proposal_prompt(tenant_id=event.tenant_id, assertion_id=data["assertion_id"])
    elif event.type == ev.PROPOSAL_CLOSED:
        actions.withdraw_prompts(tenant_id=event.tenant_id, proposal_assertion_id=data["assertion_id"],
                                 reason=f"proposal {data.get('fate', 'closed')}")
    elif event.type == ev.FOLLOWUP_NEEDED:
        _later("followups", event)
    elif event.type == ev.FACT_ASSERTED and data.get("outcome") == "conflict" and data.get("conflict_id"):
        actions.refresh_conflict_prompt(conflict_id=data["conflict_id"])
    elif event.type == ev.FACT_RETRACTED:
        _later("retracted", event)
    endpoints = outbox.subscribed(tenant_id=event.tenant_id, type=event.type) if event.type in outbox.EVENT_TYPES else []
    if endpoints:
        built = outbox.domain_event_data(event, winner=_winner)
        if built is not None:
            payload, assertion_ids = built
            outbox.record(tenant_id=event.tenant_id, subject_id=event.subject_id, type=event.type, data=payload,
                          assertion_ids=assertion_ids, endpoints=endpoints)
    if event.type == ev.FACT_ERASED:
        actions.scrub_erased(tenant_id=event.tenant_id, subject_id=event.subject_id,
                             assertion_id=data["assertion_id"])
    elif event.type == ev.SUBJECT_ERASED:
        actions.scrub_erased(tenant_id=event.tenant_id, subject_id=event.subject_id)


def _later(kind: str, event: ev.DomainEvent) -> None:
    """Keep ``event`` for :func:`finish_delivery` (all of a kind in one
    statement); outside a delivery, finish it now."""
    if ev.keep(kind, event) is None:
        finish_delivery({kind: [event]})


def finish_delivery(kept: dict) -> None:
    """After a delivery (:func:`facts.events.after_delivery`): the
    follow-ups its events asked for (:func:`actions.open_followups`), the
    follow-ups about an assertion it retracted closed, and the open
    conflict prompts that quote one reworded from the keys' state now (one
    query for all of them). The rows are all written by then, so doing this
    after the other events changes nothing they would have seen."""
    followups = kept.pop("followups", [])
    if followups:
        actions.open_followups([
            {"tenant_id": e.tenant_id, "subject_id": e.subject_id, "fact_key_id": e.fact_key_id,
             "statement": e.data["new"], "system_record": e.data.get("system_record")} for e in followups])
    retracted: dict[int, list[ev.DomainEvent]] = {}
    for e in kept.pop("retracted", []):
        retracted.setdefault(e.tenant_id, []).append(e)
    for tenant_id, events in retracted.items():
        actions.close_followups_of_retracted(tenant_id=tenant_id,
                                             assertion_ids=sorted({e.data["assertion_id"] for e in events}))
        conflict_ids = (ClarificationPrompt.objects
                        .filter(tenant_id=tenant_id, subject_id__in={e.subject_id for e in events},
                                kind=ClarificationPrompt.KIND_CONFLICT, status__in=ClarificationPrompt.OPEN_STATUSES,
                                assertion_ids__has_any_keys=sorted({e.data["assertion_id"] for e in events}))
                        .order_by("conflict_id").values_list("conflict_id", flat=True).distinct())
        for conflict_id in conflict_ids:
            actions.refresh_conflict_prompt(conflict_id=str(conflict_id))


def _winner(key: FactKey, valid_from: str) -> dict | None:
    """The claim holding at ``valid_from`` now (a resolved conflict's new
    value, with its source and both time axes)."""
    at: datetime = parse_time(valid_from, "valid_from")
    state = key_resolution(fact_key=key)
    holding = [s for s in state.resolution.at(at) if s.status == SEGMENT_VALUE]
    if not holding:
        return None
    row = Assertion.objects.filter(pk=holding[0].winner.id).first()
    return outbox.claim_payload(row) if row is not None else None


def connect() -> None:
    """Subscribe to the ledger's events and handle the inbound
    ``clarification.answered`` webhook (idempotent)."""
    ev.subscribe(on_domain_event)
    ev.after_delivery(actions.request_kept_prompts)
    ev.after_delivery(finish_delivery)
    ev.prefetch_with_writes(outbox.active_endpoints)
    register_handler("clarification.answered", actions.answer_from_webhook)
