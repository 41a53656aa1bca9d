"""End to end with a real Celery worker consuming from the real Redis broker
(not eager mode), a real local HTTP receiver, and a broker that goes away.

The worker is a ``celery -A memoryui worker`` subprocess on the test
database, consuming a queue of its own (so concurrent test runs sharing the
Redis database do not take each other's tasks), with short webhook backoff.
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

import pytest
import redis
from standardwebhooks.webhooks import Webhook

from conflicts import scheduling, tasks
from conflicts.models import ClarificationPrompt, Delivery, WebhookEndpoint
from tests.conflicts.factories import NEUE, tie

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.django_db(transaction=True)


def eventually(check, timeout: float = 20.0, interval: float = 0.05):
    """Poll ``check()`` until it returns something truthy; return it."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval)


def _reset_producers() -> None:
    from memoryui.celery import app

    app._pool = None
    if "amqp" in app.__dict__:
        app.__dict__["amqp"]._producer_pool = None


@pytest.fixture(scope="module")
def worker(django_db_setup, django_db_blocker, tmp_path_factory):
    """A real worker process on the test database and a private queue."""
    from django.conf import settings

    from memoryui.celery import app

    db = settings.DATABASES["default"]
    database_url = f"postgresql://{db['USER']}:{db['PASSWORD']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"
    queue = f"test-conflicts-{uuid.uuid4().hex[:10]}"
    log = tmp_path_factory.mktemp("worker") / "worker.log"
    env = {**os.environ, "DATABASE_URL": database_url, "CELERY_QUEUE": queue, "LOG_LEVEL": "WARNING",
           "MEMORYUI_WEBHOOK_BACKOFF_BASE_SECONDS": "0.2", "MEMORYUI_WEBHOOK_BACKOFF_MAX_SECONDS": "1",
           "MEMORYUI_OUTBOX_STUCK_SECONDS": "0", "MEMORYUI_WEBHOOK_TIMEOUT_SECONDS": "5"}
    saved_queue = app.conf.CELERY_TASK_DEFAULT_QUEUE
    app.conf.CELERY_TASK_DEFAULT_QUEUE = queue
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "memoryui", "worker", "-Q", queue, "--pool", "threads",
             "--concurrency", "4", "--loglevel", "INFO", "--without-gossip", "--without-mingle",
             "--without-heartbeat", "-n", f"{queue}@%h"],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
        )
    try:
        ready = eventually(lambda: proc.poll() is not None or b" ready." in log.read_bytes(), timeout=60)
        assert ready and proc.poll() is None, log.read_text()
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        app.conf.CELERY_TASK_DEFAULT_QUEUE = saved_queue
        redis.Redis.from_url(os.environ["REDIS_URL"]).delete(queue, f"_kombu.binding.{queue}")


@contextmanager
def broker_unreachable():
    """Point this process's producer at a closed port (the worker keeps its
    own connection, as a real deployment's would when the web tier loses the
    broker)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    os.environ["CELERY_BROKER_URL"] = f"redis://127.0.0.1:{port}/15"
    _reset_producers()
    try:
        yield
    finally:
        del os.environ["CELERY_BROKER_URL"]
        _reset_producers()
        scheduling.resume()


def register(agent, receiver, **extra) -> dict:
    response = agent.api("POST", "/webhook-endpoints", {"url": receiver.url, **extra})
    assert response.status_code == 201, response.content
    return response.json()


def types(receiver) -> list[str]:
    return sorted(e["type"] for e in receiver.events())


def test_high_stakes_tie_is_asked_answered_by_webhook_and_announced_signed(worker, receiver, agent):
    endpoint = register(agent, receiver)

    first, second = (agent.assert_fact(data) for data in tie())
    prompts = eventually(lambda: agent.get("/subjects/u-1/prompts")["prompts"])
    (prompt,) = prompts
    chosen = next(o for o in prompt["options"] if o["value"] == NEUE)
    answer = agent.webhook("clarification.answered",
                           {"prompt_id": prompt["prompt_id"], "choice": chosen["assertion_id"], "answered_by": "u-1"})
    facts = agent.get("/subjects/u-1/facts")["facts"]
    wanted = ["clarification.answered", "clarification.requested", "conflict.opened", "conflict.resolved"]
    arrived = receiver.wait_for(lambda r: set(wanted) <= set(types(r)))

    assert second["outcome"] == "conflict" and prompt["conflict_id"] == second["conflict_id"]
    assert "as your billing address. Which is current?" in prompt["question"]
    assert answer.status_code == 200 and answer.json()["outcome"] == "answered"
    assert [(f["status"], f["value"], f["source"]["kind"], f["source"]["id"]) for f in facts] == [
        ("value", NEUE, "correction", f"prompt:{prompt['prompt_id']}")]
    assert arrived, types(receiver)
    assert all(Webhook(endpoint["secret"]).verify(r["body"], r["headers"]) for r in receiver.requests)
    assert set(receiver.accepted.values()) == {1}
    resolved = next(e for e in receiver.events() if e["type"] == "conflict.resolved")["data"]
    assert resolved["tenant"] == agent.slug and resolved["subject"] == "u-1"
    assert resolved["new"]["value"] == NEUE and resolved["new"]["source"]["id"] == f"prompt:{prompt['prompt_id']}"
    assert sorted(c["value"] for c in resolved["old"]) == sorted(d["value"] for d in tie())
    assert {"valid_from", "recorded_at", "stated_at"} <= set(resolved["new"])
    assert first["outcome"] == "created"


def test_with_the_broker_down_webhooks_succeed_and_the_sweep_sends_later(worker, receiver, agent):
    register(agent, receiver)

    with broker_unreachable():
        started = time.monotonic()
        responses = [agent.webhook("fact.asserted", data) for data in tie(subject="u-2")]
        elapsed = time.monotonic() - started
    waiting = list(Delivery.objects.filter(tenant=agent.tenant).values_list("status", "attempts"))
    prompts_while_down = ClarificationPrompt.objects.filter(tenant=agent.tenant).count()
    tasks.sweep.delay()
    arrived = receiver.wait_for(lambda r: {"conflict.opened", "clarification.requested"} <= set(types(r)))

    assert [r.status_code for r in responses] == [200, 200]
    assert elapsed < 3, elapsed
    assert waiting == [("pending", 0)] and prompts_while_down == 0
    assert arrived, types(receiver)
    assert eventually(lambda: ClarificationPrompt.objects.filter(tenant=agent.tenant).count() == 1)
    assert eventually(lambda: set(Delivery.objects.filter(tenant=agent.tenant).values_list("status", flat=True))
                      == {"delivered"})


def test_a_receiver_failing_three_times_gets_the_event_once_per_webhook_id(worker, receiver, agent):
    receiver.fail_first = 3
    register(agent, receiver, event_types=["conflict.opened"])

    for data in tie(subject="u-3"):
        agent.assert_fact(data)
    delivered = eventually(lambda: Delivery.objects.filter(tenant=agent.tenant, status="delivered").first())

    assert delivered is not None, list(Delivery.objects.values_list("status", "attempts", "last_status_code"))
    assert dict(receiver.accepted) == {delivered.message_id: 1}
    assert dict(receiver.seen) == {delivered.message_id: 4}
    assert list(delivered.attempt_log.order_by("number").values_list("status_code", flat=True)) == [500, 500, 500, 200]


def test_a_410_disables_the_endpoint(worker, receiver, agent):
    receiver.status = 410
    endpoint = register(agent, receiver, event_types=["conflict.opened"])

    for data in tie(subject="u-4"):
        agent.assert_fact(data)
    disabled = eventually(lambda: WebhookEndpoint.objects.filter(pk=endpoint["id"], status="disabled").exists())
    for data in tie(subject="u-5"):
        agent.assert_fact(data)

    assert disabled
    assert list(Delivery.objects.filter(endpoint_id=endpoint["id"]).values_list("status", "last_status_code")) == [
        ("failed", 410)]
    assert len(receiver.requests) == 1
