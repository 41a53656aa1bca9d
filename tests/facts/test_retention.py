"""Idempotency receipts are kept for MEMORYUI_RECEIPT_RETENTION_DAYS, then
purged (facts/retention.py; the nightly task in conflicts/tasks.py)."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
import time_machine

from conflicts import tasks
from facts.models import WebhookReceipt
from facts.retention import purge_receipts
from tests.factories import assertion_data

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 6, 30, 3, 45, tzinfo=timezone.utc)


def receipts_at(tenant, when: datetime, n: int, *, prefix: str) -> None:
    with time_machine.travel(when, tick=False):
        for i in range(n):
            WebhookReceipt.objects.create(tenant=tenant, webhook_id=f"{prefix}-{i}", status_code=200, response={})


def test_purge_deletes_receipts_older_than_the_retention_and_keeps_the_rest(agent):
    tenant = agent.tenant
    receipts_at(tenant, NOW - timedelta(days=90), 3, prefix="old")
    receipts_at(tenant, NOW - timedelta(days=30, seconds=1), 2, prefix="just-past")
    receipts_at(tenant, NOW - timedelta(days=30), 1, prefix="exactly-at-cutoff")
    receipts_at(tenant, NOW - timedelta(days=1), 4, prefix="recent")
    before = WebhookReceipt.objects.filter(tenant=tenant).count()

    deleted = purge_receipts(retention_days=30, now=NOW)

    assert (before, deleted, WebhookReceipt.objects.filter(tenant=tenant).count()) == (10, 5, 5)
    assert not WebhookReceipt.objects.filter(webhook_id__startswith="old").exists()
    assert purge_receipts(retention_days=30, now=NOW) == 0


def test_purge_walks_the_table_in_chunks(agent):
    receipts_at(agent.tenant, NOW - timedelta(days=40), 25, prefix="old")
    receipts_at(agent.tenant, NOW, 3, prefix="new")

    assert purge_receipts(retention_days=30, now=NOW, chunk=4) == 25
    assert WebhookReceipt.objects.filter(tenant=agent.tenant).count() == 3


def test_the_retention_comes_from_settings(agent, settings):
    receipts_at(agent.tenant, NOW - timedelta(days=8), 2, prefix="week-old")
    receipts_at(agent.tenant, NOW - timedelta(days=6), 1, prefix="days-old")

    settings.MEMORYUI_RECEIPT_RETENTION_DAYS = 30
    assert purge_receipts(now=NOW) == 0
    settings.MEMORYUI_RECEIPT_RETENTION_DAYS = 7
    assert purge_receipts(now=NOW) == 2
    assert WebhookReceipt.objects.filter(tenant=agent.tenant).count() == 1


@pytest.mark.parametrize("days", [0, -1, 1.5])
def test_a_retention_shorter_than_a_day_is_refused(days):
    with pytest.raises(ValueError):
        purge_receipts(retention_days=days, now=NOW)


def test_the_nightly_task_purges_and_a_replay_after_the_purge_is_still_a_duplicate(agent):
    data = assertion_data(value="Berlin", valid_from="2026-03-01T00:00:00Z")
    with time_machine.travel(NOW - timedelta(days=45)):
        first = agent.assert_fact(data, webhook_id="msg_replayed")
    assert WebhookReceipt.objects.filter(tenant=agent.tenant).count() == 1

    with time_machine.travel(NOW):
        assert tasks.purge_receipts.apply().get() == 1
        assert WebhookReceipt.objects.filter(tenant=agent.tenant).count() == 0
        replay = agent.assert_fact(data, webhook_id="msg_replayed")

    assert replay["outcome"] == "duplicate"
    assert replay["assertion_id"] == first["assertion_id"]
