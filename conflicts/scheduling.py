"""Scheduling Celery tasks after commit, without ever failing the write.

CONVENTIONS.md (Zulip): what leaves the database is scheduled *on commit*.
The broker may be down; the change that caused the task is already committed
and its work is recorded in the database (an outbox delivery, an OPEN
conflict without a prompt), so a failed enqueue is logged, not raised, and
the periodic sweep picks the work up when the broker is back.

Enqueueing must not hold a request for long while the broker is down: a
publish is tried once more after 0.1 s, and after a failure enqueues from
this process are skipped for ``MEMORYUI_BROKER_PAUSE_SECONDS`` (default 5)
unless the caller is the sweep itself (``respect_pause=False``).
"""
from __future__ import annotations

import logging
import time
from functools import partial
from typing import Any

from django.conf import settings
from django.db import transaction

logger = logging.getLogger(__name__)

FAST_RETRY_POLICY = {"max_retries": 1, "interval_start": 0.1, "interval_step": 0.1, "interval_max": 0.1}
_paused_until = 0.0


def enqueue(task: Any, *, kwargs: dict, countdown: float | None = None, respect_pause: bool = True) -> bool:
    """Publish ``task`` with ``kwargs`` (JSON-serialisable) now. Returns
    whether the broker took it; never raises for a broker failure."""
    global _paused_until
    now = time.monotonic()
    if respect_pause and now < _paused_until:
        logger.warning("task.enqueue_skipped", extra={"task": task.name, "reason": "broker recently unreachable"})
        return False
    try:
        task.apply_async(kwargs=kwargs, countdown=countdown, retry=True, retry_policy=FAST_RETRY_POLICY)
    except Exception as exc:  # any broker/transport failure: the sweep will retry from the database
        _paused_until = time.monotonic() + float(getattr(settings, "MEMORYUI_BROKER_PAUSE_SECONDS", 5))
        logger.warning("task.enqueue_failed", extra={"task": task.name, "error": type(exc).__name__})
        return False
    return True


def enqueue_on_commit(task: Any, *, kwargs: dict, countdown: float | None = None) -> None:
    """Schedule :func:`enqueue` for when the current transaction commits
    (immediately when none is open)."""
    transaction.on_commit(partial(enqueue, task, kwargs=kwargs, countdown=countdown))


def resume() -> None:
    """Forget a recent broker failure (the sweep calls this once it has
    published successfully)."""
    global _paused_until
    _paused_until = 0.0
