"""Celery tasks: thin wrappers over ``conflicts/actions.py`` and
``conflicts/outbox.py`` (CONVENTIONS.md).

Every task is idempotent (it re-reads the database and does nothing when
the work is already done), acknowledged late (a worker that dies mid-task
leaves the message to be redelivered) and retried with exponential backoff
and jitter on database errors. Arguments are ids (strings), never objects.
The periodic ones are scheduled by ``CELERY_BEAT_SCHEDULE`` in
``memoryui/settings.py``.
"""
from __future__ import annotations

import logging

from celery import shared_task
from django.db import DatabaseError

from conflicts import actions, outbox
from facts.reconcile import reconcile as reconcile_projection
from facts.retention import purge_receipts as purge_old_receipts

logger = logging.getLogger(__name__)

RELIABLE = {
    "bind": True, "acks_late": True, "autoretry_for": (DatabaseError,), "retry_backoff": 2,
    "retry_backoff_max": 300, "retry_jitter": True, "max_retries": 10,
}


@shared_task(name="conflicts.open_conflict_prompt", **RELIABLE)
def open_conflict_prompt(self, conflict_id: str) -> str | None:
    """Open the prompt of a high-stakes OPEN conflict (once)."""
    prompt = actions.open_conflict_prompt(conflict_id=conflict_id)
    return str(prompt.id) if prompt else None


@shared_task(name="conflicts.open_proposal_prompt", **RELIABLE)
def open_proposal_prompt(self, tenant_id: int, assertion_id: str) -> str | None:
    """Open the confirmation prompt of a high-stakes proposal (once)."""
    prompt = actions.open_proposal_prompt(tenant_id=tenant_id, assertion_id=assertion_id)
    return str(prompt.id) if prompt else None


@shared_task(name="conflicts.open_prompts", **RELIABLE)
def open_prompts(self, conflict_ids: list[str] = (), proposals: list[list] = ()) -> int:
    """Open the prompts one ledger write asked for (once each): conflict
    ids, and ``[tenant id, assertion id]`` of proposals."""
    return actions.open_prompts(conflict_ids=conflict_ids, proposals=proposals)


@shared_task(name="conflicts.deliver", **RELIABLE)
def deliver(self, delivery_id: str) -> str:
    """Attempt one outgoing webhook delivery if it is due."""
    return outbox.deliver(delivery_id=delivery_id)


@shared_task(name="conflicts.escalate_prompts", **RELIABLE)
def escalate_prompts(self) -> int:
    """Periodic: prompts unanswered past the tenant's delay go to staff."""
    return actions.escalate_prompts()


@shared_task(name="conflicts.expire_prompts", **RELIABLE)
def expire_prompts(self) -> int:
    """Periodic: prompts past ``expires_at`` expire (the earlier value stays)."""
    return actions.expire_prompts()


@shared_task(name="conflicts.sweep", **RELIABLE)
def sweep(self) -> dict:
    """Periodic: re-enqueue stuck outbox deliveries and open prompts whose
    task was lost while the broker was down."""
    return {"deliveries": outbox.sweep(), "prompt_requests": actions.open_requested_prompts()}


@shared_task(name="conflicts.reconcile", **RELIABLE)
def reconcile(self, repair: bool = True) -> dict:
    """Nightly: check the current-view projection against the log per key
    (``facts.reconcile``; DESIGN.md, "The read model") and rebuild drifting
    keys. The projection is derived data, so repairing is safe; drift is
    logged (key ids, never values) because it means a bug somewhere."""
    report = reconcile_projection(repair=repair)
    summary = {"keys_checked": report.keys_checked, "drifting": len(report.drifting), "repaired": report.repaired}
    if report.drifting:
        logger.warning("reconcile.drift", extra={**summary, "keys": [d.fact_key_id for d in report.drifting[:100]]})
    else:
        logger.info("reconcile.clean", extra=summary)
    return summary


@shared_task(name="conflicts.purge_receipts", **RELIABLE)
def purge_receipts(self) -> int:
    """Nightly: delete idempotency receipts older than
    ``MEMORYUI_RECEIPT_RETENTION_DAYS`` (``facts.retention``)."""
    deleted = purge_old_receipts()
    logger.info("receipts.purged", extra={"deleted": deleted})
    return deleted
