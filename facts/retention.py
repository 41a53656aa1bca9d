"""Bounded retention of idempotency receipts (issue 6: what grows with the
store).

A :class:`~facts.models.WebhookReceipt` answers a replayed ``webhook-id``
or batch event ``id`` with its first response. It is only needed while a
replay can still arrive with its key: a signed webhook is refused outright
once its ``webhook-timestamp`` is more than 5 minutes old (Standard
Webhooks tolerance), and an assertion re-sent after its receipt is gone is
still caught by the ``(tenant, payload_hash)`` uniqueness on live
assertions (outcome ``duplicate``, nothing written twice). A retraction
re-sent then finds its targets already retracted and changes nothing.
Keeping receipts for ``MEMORYUI_RECEIPT_RETENTION_DAYS`` (30 by default)
therefore bounds the table, and its unique index, to a month of traffic.
"""
from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from facts.models import WebhookReceipt

PURGE_CHUNK = 10_000


def purge_receipts(*, retention_days: int | None = None, now: datetime | None = None,
                   chunk: int = PURGE_CHUNK) -> int:
    """Delete every :class:`~facts.models.WebhookReceipt` whose
    ``created_at`` is strictly older than ``now`` minus ``retention_days``
    days; return how many rows were deleted.

    ``retention_days``: whole days (24 hours each), default
    ``settings.MEMORYUI_RECEIPT_RETENTION_DAYS``; must be at least 1 so a
    receipt always outlives the 5-minute webhook replay window. ``now``:
    an aware datetime, default the current time. Rows go in primary-key
    order, ``chunk`` per statement, each statement in its own transaction,
    so a first purge of a large table holds no long lock and the scan
    passes over the table once. Safe to run concurrently with ingest and
    with itself (a row deleted twice is simply not counted twice).
    """
    days = settings.MEMORYUI_RECEIPT_RETENTION_DAYS if retention_days is None else retention_days
    if int(days) != days or days < 1:
        raise ValueError(f"receipt retention must be a whole number of days >= 1, got {days!r}")
    cutoff = (now or timezone.now()) - timedelta(days=int(days))
    deleted, last_id = 0, 0
    while True:
        ids = list(WebhookReceipt.objects.filter(created_at__lt=cutoff, id__gt=last_id)
                   .order_by("id").values_list("id", flat=True)[:chunk])
        if not ids:
            break
        deleted += WebhookReceipt.objects.filter(id__in=ids).delete()[0]
        last_id = ids[-1]
        if len(ids) < chunk:
            break
    return deleted
