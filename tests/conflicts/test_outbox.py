"""Outgoing webhooks (API.md, "Outgoing webhooks"): endpoints, outbox rows
in the same transaction as the change, Standard Webhooks signatures,
backoff with jitter, 410, the delivery log, the sweep."""
from datetime import timedelta

import pytest
import time_machine
from django.db import transaction
from django.utils import timezone
from standardwebhooks.webhooks import Webhook

from conflicts import outbox
from conflicts.models import Delivery, OutboxMessage, WebhookEndpoint
from facts import ledger
from facts.inputs import parse_assertion
from tests.conflicts.conftest import counts
from tests.conflicts.factories import NEUE, EndpointFactory, tie


def register(agent, url, **extra):
    response = agent.api("POST", "/webhook-endpoints", {"url": url, **extra})
    assert response.status_code == 201, response.content
    return response.json()


def test_registering_an_endpoint_returns_its_secret_once(agent, receiver):
    created = register(agent, receiver.url, event_types=["conflict.opened", "conflict.opened"])
    listed = agent.get("/webhook-endpoints")["endpoints"]

    assert created["secret"].startswith("whsec_")
    assert created["event_types"] == ["conflict.opened"] and created["status"] == "active"
    assert [(e["id"], e["url"]) for e in listed] == [(created["id"], receiver.url)]
    assert "secret" not in listed[0]


@pytest.mark.parametrize("body, field", [
    ({}, "url"),
    ({"url": "ftp://example.com/x"}, "url"),
    ({"url": "/relative"}, "url"),
    ({"url": "https://user:pw@example.com/x"}, "url"),
    ({"url": "http://example.com:99999/x"}, "url"), ({"url": "http://example.com:0/x"}, "url"),
    ({"url": "http://example.com/a b"}, "url"),
    ({"url": "https://example.com/" + "x" * 2000}, "url"),
    ({"url": "https://example.com/x", "event_types": "conflict.opened"}, "event_types"),
    ({"url": "https://example.com/x", "event_types": ["conflict.opened", "fact.asserted"]}, "event_types[1]"),
])
def test_bad_endpoints_are_refused_naming_the_field(agent, body, field):
    before = counts(agent.tenant)

    response = agent.api("POST", "/webhook-endpoints", body)

    assert (response.status_code, response.json()["field"]) == (400, field)
    assert counts(agent.tenant) == before


@pytest.mark.parametrize("url", [
    "http://127.0.0.1:9/hook", "http://localhost/hook", "http://[::1]/hook", "http://10.0.0.5/hook",
    "http://192.168.1.1/hook", "http://169.254.169.254/latest/meta-data", "http://0.0.0.0/hook",
])
def test_an_endpoint_on_a_non_public_address_is_refused(agent, settings, url):
    settings.MEMORYUI_WEBHOOK_PRIVATE_TARGETS = False
    before = counts(agent.tenant)

    response = agent.api("POST", "/webhook-endpoints", {"url": url})

    assert (response.status_code, response.json()["field"]) == (400, "url")
    assert "non-public address" in response.json()["detail"]
    assert counts(agent.tenant) == before


def test_deleting_an_endpoint_stops_deliveries_and_another_tenant_cannot(agent, other_agent, receiver):
    created = register(agent, receiver.url)
    before = counts(agent.tenant)

    foreign = other_agent.api("DELETE", f"/webhook-endpoints/{created['id']}")
    unchanged = counts(agent.tenant)
    deleted = agent.api("DELETE", f"/webhook-endpoints/{created['id']}")
    again = agent.api("DELETE", f"/webhook-endpoints/{created['id']}")
    for data in tie():
        agent.assert_fact(data)

    assert (foreign.status_code, deleted.status_code, again.status_code) == (404, 200, 404)
    assert unchanged == before
    assert agent.get("/webhook-endpoints")["endpoints"] == []
    assert not Delivery.objects.filter(tenant=agent.tenant).exists()


def test_outbox_rows_are_written_in_the_same_transaction_as_the_change(agent, django_capture_on_commit_callbacks):
    endpoint = EndpointFactory(tenant=agent.tenant)
    data = [parse_assertion(d, received_at=timezone.now()) for d in tie()]

    with pytest.raises(RuntimeError), transaction.atomic():
        for parsed in data:
            ledger.assert_fact(tenant=agent.tenant, data=parsed, actor="test")
        inside = list(OutboxMessage.objects.filter(tenant=agent.tenant).values_list("type", flat=True))
        raise RuntimeError("the write fails after the ledger call")
    after_rollback = OutboxMessage.objects.filter(tenant=agent.tenant).count()
    with django_capture_on_commit_callbacks() as scheduled:
        for parsed in data:
            ledger.assert_fact(tenant=agent.tenant, data=parsed, actor="test")

    assert inside == ["conflict.opened"] and after_rollback == 0
    assert list(Delivery.objects.filter(endpoint=endpoint).values_list("message__type", "status")) == [
        ("conflict.opened", "pending")]
    assert len(scheduled) == 2  # the prompt task and the delivery task, both after commit


def test_only_subscribed_event_types_are_queued(agent):
    wants_answers = EndpointFactory(tenant=agent.tenant, event_types=["clarification.answered"])
    wants_all = EndpointFactory(tenant=agent.tenant)

    for data in tie():
        agent.assert_fact(data)

    assert not Delivery.objects.filter(endpoint=wants_answers).exists()
    assert Delivery.objects.filter(endpoint=wants_all).count() == 1


def test_deliveries_are_signed_and_carry_tenant_subject_ids_values_times_and_source(agent, ask, receiver):
    endpoint = register(agent, receiver.url)

    prompt = ask(agent, tie())
    events = {e["type"]: e for e in receiver.events()}
    opened = events["conflict.opened"]["data"]

    assert set(events) == {"conflict.opened", "clarification.requested"}
    assert all(Webhook(endpoint["secret"]).verify(r["body"], r["headers"]) for r in receiver.requests)
    assert {r["headers"]["webhook-id"] for r in receiver.requests} == set(
        OutboxMessage.objects.filter(tenant=agent.tenant).values_list("id", flat=True))
    assert (opened["tenant"], opened["subject"], opened["predicate"], opened["stakes"]) == (
        agent.slug, "u-1", "billing_address", "high")
    assert opened["conflict_id"] == str(prompt.conflict_id)
    assert {(c["value"], c["valid_from"], c["source"]["kind"]) for c in opened["candidates"]} == {
        (d["value"], "2026-03-01T00:00:00Z", "user_statement") for d in tie()}
    assert {"stated_at", "recorded_at", "valid_to", "assertion_id"} <= set(opened["candidates"][0])
    assert events["clarification.requested"]["data"]["prompt_id"] == str(prompt.id)


def test_a_failing_receiver_is_retried_with_growing_backoff_and_gets_the_event_once(agent, inline_tasks, receiver,
                                                                                      settings):
    settings.MEMORYUI_WEBHOOK_BACKOFF_BASE_SECONDS = 10
    receiver.fail_first = 3
    register(agent, receiver.url, event_types=["conflict.opened"])
    with inline_tasks():
        for data in tie():
            agent.assert_fact(data)
    delivery = Delivery.objects.get(tenant=agent.tenant)
    waits = []

    for _ in range(3):
        waits.append((delivery.next_attempt_at - delivery.last_attempt_at).total_seconds())
        early = outbox.deliver(delivery_id=str(delivery.id))
        with time_machine.travel(delivery.next_attempt_at + timedelta(milliseconds=1)):
            outbox.deliver(delivery_id=str(delivery.id))
        delivery.refresh_from_db()

    assert early == "skipped"
    assert [5 <= waits[0] <= 10, 10 <= waits[1] <= 20, 20 <= waits[2] <= 40] == [True] * 3
    assert (delivery.status, delivery.attempts, delivery.last_status_code) == ("delivered", 4, 200)
    assert list(delivery.attempt_log.order_by("number").values_list("status_code", flat=True)) == [500, 500, 500, 200]
    assert dict(receiver.accepted) == {delivery.message_id: 1}
    assert dict(receiver.seen) == {delivery.message_id: 4}


def test_a_410_disables_the_endpoint_and_nothing_more_is_queued(agent, ask, receiver):
    receiver.status = 410
    endpoint = register(agent, receiver.url)

    ask(agent, tie(subject="u-1"))
    ask(agent, tie(subject="u-2"))
    listed = agent.get("/webhook-endpoints")["endpoints"]

    assert (listed[0]["status"], listed[0]["disabled_reason"]) == ("disabled", "the receiver answered 410 Gone")
    assert sorted(Delivery.objects.filter(endpoint_id=endpoint["id"]).values_list("message__type", "status",
                                                                                   "last_status_code")) == [
        ("clarification.requested", "cancelled", None), ("conflict.opened", "failed", 410)]
    assert len(receiver.requests) == 1


def test_an_unreachable_receiver_is_logged_and_gives_up_after_the_last_attempt(agent, inline_tasks, settings):
    settings.MEMORYUI_WEBHOOK_MAX_ATTEMPTS = 2
    endpoint = EndpointFactory(tenant=agent.tenant, url="http://127.0.0.1:9/closed", event_types=["conflict.opened"])
    with inline_tasks():
        for data in tie():
            agent.assert_fact(data)
    delivery = Delivery.objects.get(endpoint=endpoint)
    with time_machine.travel(delivery.next_attempt_at + timedelta(milliseconds=1)):
        outbox.deliver(delivery_id=str(delivery.id))
    delivery.refresh_from_db()
    log = list(delivery.attempt_log.order_by("number"))

    assert (delivery.status, delivery.attempts) == ("failed", 2)
    assert [a.status_code for a in log] == [None, None]
    assert all(a.error.startswith("ConnectionError") for a in log)


def test_the_delivery_log_is_listed_with_the_endpoint(agent, ask, receiver):
    receiver.fail_first = 1
    register(agent, receiver.url, event_types=["conflict.opened"])

    ask(agent, tie())
    (listed,) = agent.get("/webhook-endpoints")["endpoints"]
    (delivery,) = listed["deliveries"]

    assert (delivery["event_type"], delivery["status"], delivery["attempts"], delivery["last_status_code"]) == (
        "conflict.opened", "pending", 1, 500)
    assert [(a["number"], a["status_code"]) for a in delivery["attempt_log"]] == [(1, 500)]
    assert delivery["next_attempt_at"] is not None


def test_the_sweep_sends_deliveries_whose_task_was_lost_and_leaves_fresh_ones(agent, inline_tasks, receiver):
    endpoint = EndpointFactory(tenant=agent.tenant, url=receiver.url)
    for data in tie():
        agent.assert_fact(data)  # no on-commit here: as if the broker had been down
    delivery = Delivery.objects.get(endpoint=endpoint)

    with inline_tasks():
        fresh = outbox.sweep(stuck_after_seconds=60)
    with time_machine.travel(delivery.created_at + timedelta(seconds=61)), inline_tasks():
        stuck = outbox.sweep(stuck_after_seconds=60)
    delivery.refresh_from_db()

    assert (fresh, stuck) == (0, 1)
    assert delivery.status == "delivered"
    assert [e["type"] for e in receiver.events()] == ["conflict.opened"]


def test_a_delivery_whose_worker_died_is_taken_over_after_its_lease(agent, inline_tasks, receiver):
    endpoint = EndpointFactory(tenant=agent.tenant, url=receiver.url)
    for data in tie():
        agent.assert_fact(data)
    now = timezone.now()
    Delivery.objects.filter(endpoint=endpoint).update(status="sending", attempts=1, lease_until=now + timedelta(seconds=50))
    delivery = Delivery.objects.get(endpoint=endpoint)

    held = outbox.deliver(delivery_id=str(delivery.id))
    with time_machine.travel(now + timedelta(seconds=51)):
        taken = outbox.deliver(delivery_id=str(delivery.id))
    delivery.refresh_from_db()

    assert (held, taken) == ("skipped", "delivered")
    assert (delivery.status, delivery.attempts) == ("delivered", 2)
    assert WebhookEndpoint.objects.get(pk=endpoint.pk).status == "active"


@pytest.mark.parametrize("attempt, low, high", [(1, 5, 10), (2, 10, 20), (5, 80, 160), (20, 1800, 3600)])
def test_backoff_is_exponential_with_jitter_and_capped(attempt, low, high):
    least = outbox.backoff_seconds(attempt=attempt, base=10, cap=3600, rand=lambda: 0.0)
    most = outbox.backoff_seconds(attempt=attempt, base=10, cap=3600, rand=lambda: 1.0)

    assert (least, most) == (low, high)


def test_answering_sends_clarification_answered_and_conflict_resolved(agent, ask, inline_tasks, receiver):
    register(agent, receiver.url, event_types=["clarification.answered", "conflict.resolved"])
    prompt = ask(agent, tie())
    chosen = next(o for o in prompt.options if o["value"] == NEUE)

    with inline_tasks():
        agent.api("POST", f"/prompts/{prompt.id}/answer", {"choice": chosen["assertion_id"], "answered_by": "u-1"})
    events = {e["type"]: e["data"] for e in receiver.events()}
    answered = events["clarification.answered"]

    assert set(events) == {"clarification.answered", "conflict.resolved"}
    assert (answered["prompt_id"], answered["choice"], answered["answered_by"]) == (str(prompt.id), chosen["assertion_id"], "u-1")
    assert answered["new"]["value"] == NEUE and answered["new"]["source"] == {"kind": "correction", "id": f"prompt:{prompt.id}"}
    assert sorted(o["value"] for o in answered["old"]) == sorted(d["value"] for d in tie())
    assert events["conflict.resolved"]["value"] == NEUE


def test_a_signed_webhook_looks_up_endpoints_with_its_lock_and_stores_its_receipt_with_its_rows(agent, receiver):
    # Round trips are the webhook's cost (issue 6): the endpoints come back
    # with the key lock, the idempotency receipt goes with the new rows.
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from tests.factories import assertion_data

    register(agent, receiver.url, event_types=["fact.superseded"])
    agent.assert_fact(assertion_data(value="Berlin", valid_from="2026-01-01T00:00:00Z"))
    control = ("SAVEPOINT", "RELEASE SAVEPOINT", "ROLLBACK", "BEGIN", "COMMIT")
    moved = assertion_data(value="Munich", valid_from="2026-03-01T00:00:00Z")

    with CaptureQueriesContext(connection) as ctx:
        first = agent.webhook("fact.asserted", moved, webhook_id="msg_rt_1")

    statements = [q["sql"] for q in ctx.captured_queries if not q["sql"].startswith(control)]
    endpoint_reads = [s for s in statements if 'FROM "conflicts_webhookendpoint"' in s]
    receipt_writes = [s for s in statements if 'INSERT INTO "facts_webhookreceipt"' in s]
    assert first.json()["outcome"] == "superseded_existing"
    assert len(endpoint_reads) == 1 and 'FROM "facts_factkey"' in endpoint_reads[0]
    assert len(receipt_writes) == 1 and 'INSERT INTO "facts_assertion"' in receipt_writes[0]
    assert OutboxMessage.objects.filter(tenant=agent.tenant, type="fact.superseded").count() == 1
    replay = agent.webhook("fact.asserted", moved, webhook_id="msg_rt_1")
    assert replay.json() == first.json()
    assert OutboxMessage.objects.filter(tenant=agent.tenant, type="fact.superseded").count() == 1
