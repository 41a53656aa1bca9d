"""Fixtures for the conflicts tests: running tasks inline (unit tests), a
real local HTTP receiver for outgoing webhooks, row counting."""
from __future__ import annotations

import json
import threading
from collections import Counter
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from conflicts.models import ClarificationPrompt, Delivery, DeliveryAttempt, OutboxMessage, ReviewTask, WebhookEndpoint
from facts.models import Assertion, Conflict, Event


@pytest.fixture
def inline_tasks(django_capture_on_commit_callbacks):
    """A context manager: inside it, Celery tasks run in-process (eager) and
    on-commit callbacks run when the block ends, so a webhook's prompt and
    deliveries happen before the next line. Unit tests only; the end-to-end
    tests use a real worker."""
    from memoryui.celery import app

    @contextmanager
    def run():
        # The app reads Django's CELERY_* names first, so those are the keys to override.
        saved = app.conf.CELERY_TASK_ALWAYS_EAGER, app.conf.get("CELERY_TASK_EAGER_PROPAGATES", False)
        app.conf.CELERY_TASK_ALWAYS_EAGER, app.conf.CELERY_TASK_EAGER_PROPAGATES = True, True
        try:
            with django_capture_on_commit_callbacks(execute=True):
                yield
        finally:
            app.conf.CELERY_TASK_ALWAYS_EAGER, app.conf.CELERY_TASK_EAGER_PROPAGATES = saved

    return run


def counts(tenant) -> dict:
    """Rows any prompt, review or outbox write would touch, for refusal
    tests (before == after)."""
    models = (Assertion, Event, Conflict, ClarificationPrompt, ReviewTask, OutboxMessage, Delivery, WebhookEndpoint,
              DeliveryAttempt)
    return {m.__name__: m.objects.filter(tenant=tenant).count() for m in models}


class Receiver:
    """A real HTTP server on 127.0.0.1 (ephemeral port, own thread) that
    records every request. ``fail_first`` answers that many requests per
    ``webhook-id`` with ``fail_status`` before answering 200; ``status``
    answers everything with one code. ``accepted`` counts 2xx answers per
    ``webhook-id`` (the receiver's idempotency key)."""

    def __init__(self) -> None:
        self.requests: list[dict] = []
        self.fail_first = 0
        self.fail_status = 500
        self.status: int | None = None
        self.seen: Counter = Counter()
        self.accepted: Counter = Counter()
        self.lock = threading.RLock()
        self.arrived = threading.Condition(self.lock)
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                with receiver.lock:
                    webhook_id = self.headers.get("webhook-id", "")
                    receiver.seen[webhook_id] += 1
                    if receiver.status is not None:
                        code = receiver.status
                    elif receiver.seen[webhook_id] <= receiver.fail_first:
                        code = receiver.fail_status
                    else:
                        code = 200
                    if 200 <= code < 300:
                        receiver.accepted[webhook_id] += 1
                    receiver.requests.append({"headers": {k.lower(): v for k, v in self.headers.items()},
                                              "body": body, "status": code})
                    receiver.arrived.notify_all()
                self.send_response(code)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def events(self, *, accepted_only: bool = True) -> list[dict]:
        with self.lock:
            return [json.loads(r["body"]) for r in self.requests if not accepted_only or 200 <= r["status"] < 300]

    def wait_for(self, predicate, timeout: float = 20.0) -> bool:
        """Block until ``predicate(receiver)`` holds (or ``timeout`` s)."""
        with self.arrived:
            return self.arrived.wait_for(lambda: predicate(self), timeout=timeout)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.close()


@pytest.fixture
def ask(inline_tasks):
    """Send assertions by signed webhook with tasks inline; return the
    newest prompt of the agent's tenant (``None`` if none opened)."""

    def run(agent, payloads):
        with inline_tasks():
            for data in payloads:
                agent.assert_fact(data)
        return ClarificationPrompt.objects.filter(tenant=agent.tenant).order_by("-created_at").first()

    return run


def option_id(prompt, *, value=None, kind=None) -> str:
    """The assertion id of the option with ``value`` (or of ``kind``)."""
    return next(o["assertion_id"] for o in prompt.options
                if (value is None or o["value"] == value) and (kind is None or o["kind"] == kind))


@pytest.fixture
def private_queue():
    """For tests whose transactions really commit: tasks scheduled on commit
    go to a queue of their own on the real broker, deleted afterwards, so no
    other test run's worker takes them and nothing is left behind."""
    import os
    import uuid

    import redis

    from memoryui.celery import app

    queue = f"test-conflicts-{uuid.uuid4().hex[:10]}"
    saved = app.conf.CELERY_TASK_DEFAULT_QUEUE
    app.conf.CELERY_TASK_DEFAULT_QUEUE = queue
    try:
        yield queue
    finally:
        app.conf.CELERY_TASK_DEFAULT_QUEUE = saved
        redis.Redis.from_url(os.environ["REDIS_URL"]).delete(queue, f"_kombu.binding.{queue}")
