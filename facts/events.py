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
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

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
_after_delivery: list[Callable[[dict], None]] = []
_memo: ContextVar[dict | None] = ContextVar("domain_event_memo", default=None)
_held: ContextVar[list | None] = ContextVar("held_domain_events", default=None)
_scratch: ContextVar[dict | None] = ContextVar("domain_event_scratch", default=None)


def subscribe(handler: Callable[[DomainEvent], None]) -> Callable[[DomainEvent], None]:
    """Register ``handler`` (idempotent); usable as a decorator."""
    if handler not in _subscribers:
        _subscribers.append(handler)
    return handler


def after_delivery(hook: Callable[[dict], None]) -> Callable[[dict], None]:
    """Register ``hook(kept)`` (idempotent): run once the subscribers have
    had every event of a delivery (a released :func:`held`, or one event
    published outside a hold), in the same transaction, with the dict they
    kept work in (:func:`keep`), so that a subscriber can finish the
    work of a thousand events in one statement. Not run when a subscriber
    raised (the write rolls back)."""
    if hook not in _after_delivery:
        _after_delivery.append(hook)
    return hook


def keep(kind: str, item: Any) -> list | None:
    """While subscribers receive a delivery, add ``item`` to the delivery's
    list of ``kind`` (kept for an :func:`after_delivery` hook, which finds
    it under ``kind``) and return that list; ``None`` outside a delivery
    (then do the work at once)."""
    kept = _scratch.get()
    if kept is None:
        return None
    items = kept.setdefault(kind, [])
    items.append(item)
    return items


def publish(event: DomainEvent) -> None:
    """Deliver ``event`` to every subscriber, in registration order (inside
    :func:`held`, once released). A subscriber's exception propagates and
    rolls the write back: its rows are part of the change."""
    buffer = _held.get()
    if buffer is not None:
        buffer.append(event)
        return
    _deliver([event])


def _deliver(events: list[DomainEvent]) -> None:
    """Each event to every subscriber, then the :func:`after_delivery`
    hooks, with a fresh dict for :func:`keep` (an event a subscriber publishes
    meanwhile is a delivery of its own)."""
    kept: dict = {}
    token = _scratch.set(kept)
    try:
        for event in events:
            logger.info("domain_event", extra={"type": event.type, "tenant_id": event.tenant_id})
            for handler in list(_subscribers):
                handler(event)
        for hook in list(_after_delivery):
            hook(kept)
    finally:
        _scratch.reset(token)


@contextmanager
def held() -> Iterator[Callable[[], None]]:
    """Hold the events published inside until the write has sent the rows
    they describe: yields ``release()``, which delivers them in order (and
    ends the hold; events subscribers publish then are delivered at once).
    Events never released are dropped with the write that failed, whose
    transaction rolls back."""
    buffer: list[DomainEvent] = []
    token = _held.set(buffer)
    released = False

    def release() -> None:
        nonlocal released
        if released:
            return
        released = True
        _held.reset(token)
        if buffer:
            _deliver(buffer)

    try:
        yield release
    finally:
        if not released:
            _held.reset(token)


@contextmanager
def write_scope() -> Iterator[None]:
    """The span of one ledger write (one transaction, possibly many events).
    Inside it :func:`memo` keeps what a subscriber looked up, so a batch of
    1,000 events asks once instead of 1,000 times. Nested scopes share the
    outer one."""
    token = _memo.set({}) if _memo.get() is None else None
    try:
        yield
    finally:
        if token is not None:
            _memo.reset(token)


def memo(key: Any, compute: Callable[[], Any]) -> Any:
    """``compute()``, remembered under ``key`` for the rest of the current
    :func:`write_scope` (computed every time outside one). Only for lookups
    the write itself cannot change (a tenant's webhook endpoints, say)."""
    cache = _memo.get()
    if cache is None:
        return compute()
    if key not in cache:
        cache[key] = compute()
    return cache[key]


# Lookups a subscriber memoises during a write, which the ledger runs in its
# lock round trip instead: tenant id -> (memo key, query).
_prefetchers: list[Callable[[int], tuple[Any, Any]]] = []


def prefetch_with_writes(prefetcher: Callable[[int], tuple[Any, Any]]) -> Callable[[int], tuple[Any, Any]]:
    """Register ``prefetcher(tenant_id) -> (memo key, query)`` (idempotent):
    a lookup a subscriber asks :func:`memo` for during a write, ``query``
    being anything :func:`facts.bulk.fetch_together` runs and ``compute``
    returning its rows. The ledger sends the query with its first round
    trip (:func:`prefetches`, :func:`remember`), so the lookup costs no
    round trip of its own."""
    if prefetcher not in _prefetchers:
        _prefetchers.append(prefetcher)
    return prefetcher


def prefetches(tenant_id: int) -> list[tuple[Any, Any]]:
    """``(memo key, query)`` of every registered prefetch for a write of
    ``tenant_id``; none outside a :func:`write_scope`."""
    return [p(tenant_id) for p in _prefetchers] if _memo.get() is not None else []


def remember(key: Any, value: Any) -> None:
    """Store ``value`` as :func:`memo`'s answer for ``key`` in the current
    :func:`write_scope` (nothing outside one)."""
    cache = _memo.get()
    if cache is not None:
        cache[key] = value
