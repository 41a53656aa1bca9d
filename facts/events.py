"""Domain events published by the ledger (CONVENTIONS.md: ``conflicts/``
subscribes; ``facts/`` never imports it).

:func:`publish` calls every subscriber synchronously *inside* the ledger's
transaction, so a subscriber's own rows (an outbox delivery, a prompt) commit
or roll back with the change that caused them; anything that leaves the
database (a Celery task, an HTTP call) must be scheduled by the subscriber
with ``transaction.on_commit``.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Callable

logger = logging.getLogger(__name__)

# Event types, as in API.md "Outgoing webhooks", plus internal ones.
FACT_ASSERTED = "fact.asserted"
FACT_SUPERSEDED = "fact.superseded"
FACT_RETRACTED = "fact.retracted"
FACT_ERASED = "fact.erased"
CONFLICT_OPENED = "conflict.opened"
CONFLICT_RESOLVED = "conflict.resolved"
PROPOSAL_OPENED = "proposal.opened"
PROPOSAL_CLOSED = "proposal.closed"
FOLLOWUP_NEEDED = "followup.needed"
POLICY_CHANGED = "policy.changed"
SUBJECT_ERASED = "subject.erased"


@dataclass(frozen=True)
class DomainEvent:
    """What happened, for subscribers. ``data`` holds ids, both time axes,
    values (old and new) and the source; it never goes to the event log."""

    type: str
    tenant_id: int
    subject_id: int | None
    fact_key_id: int | None = None
    data: dict[str, Any] = field(default_factory=dict)


_subscribers: list[Callable[[DomainEvent], None]] = []


def subscribe(handler: Callable[[DomainEvent], None]) -> Callable[[DomainEvent], None]:
    """Register ``handler`` (idempotent); usable as a decorator."""
    if handler not in _subscribers:
        _subscribers.append(handler)
    return handler


def publish(event: DomainEvent) -> None:
    """Deliver ``event`` to every subscriber, in registration order. A
    subscriber's exception propagates and rolls the write back: its rows are
    part of the change."""
    logger.info("domain_event", extra={"type": event.type, "tenant_id": event.tenant_id})
    for handler in list(_subscribers):
        handler(event)
