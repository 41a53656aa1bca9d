"""Writes to one fact key are serialised (DESIGN.md, "The write rule"):
two writers racing on one key on real PostgreSQL keep both assertions, and
the projection they leave equals a rebuild from the log."""
from __future__ import annotations

import threading

import pytest
from django.db import connection
from django.utils import timezone

from facts import ledger
from facts.inputs import parse_assertion
from facts.models import Assertion, Conflict, CurrentFact
from facts.projection import rows_digest
from facts.reconcile import reconcile
from tests.factories import TenantFactory, assertion_data

pytestmark = pytest.mark.django_db(transaction=True)


def run_together(calls: list) -> list:
    """Run each zero-argument call in its own thread and database
    connection, released together. Returns results or exceptions, in order."""
    barrier = threading.Barrier(len(calls))
    results: list = [None] * len(calls)

    def run(i: int) -> None:
        try:
            barrier.wait(timeout=10)
            results[i] = calls[i]()
        except Exception as exc:  # reported by the assertion below
            results[i] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    return results


def race(tenant, payloads: list[dict]) -> list:
    """One ``assert_fact`` per payload, all at once (:func:`run_together`)."""
    return run_together([
        lambda p=p: ledger.assert_fact(tenant=tenant, actor="test", data=parse_assertion(p, received_at=timezone.now()))
        for p in payloads
    ])


def projection_and_rebuild(tenant) -> tuple[str, str]:
    stored = rows_digest(CurrentFact.objects.filter(tenant=tenant))
    ledger.rebuild_projection(tenant=tenant)
    return stored, rows_digest(CurrentFact.objects.filter(tenant=tenant))


@pytest.mark.parametrize("predicate", ["employer", "billing_address"])
@pytest.mark.parametrize("key_exists", [False, True])
def test_two_writers_on_one_key_keep_both_and_match_a_rebuild(predicate, key_exists):
    tenant = TenantFactory()
    rounds = []
    for n in range(3):
        subject = f"u-{n}"
        setup = [ledger.assert_fact(tenant=tenant, actor="test", data=parse_assertion(
            assertion_data(subject=subject, predicate=predicate, value="Seed", valid_from="2020-01-01T00:00:00Z"),
            received_at=timezone.now()))] if key_exists else []
        rounds.append(setup + race(tenant, [
            assertion_data(subject=subject, predicate=predicate, value=value, valid_from="2025-01-01T00:00:00Z")
            for value in ("Acme", "Globex")
        ]))

    assert [type(r).__name__ for results in rounds for r in results] == ["WriteResult"] * (6 + 3 * key_exists)
    ids = {r.assertion_id for results in rounds for r in results}
    assert {str(i) for i in Assertion.objects.filter(tenant=tenant).values_list("id", flat=True)} == ids
    stored, rebuilt = projection_and_rebuild(tenant)
    assert stored == rebuilt
    assert reconcile(tenant=tenant).drifting == []


def test_high_stakes_race_opens_exactly_one_conflict_per_tie():
    tenant = TenantFactory()

    results = race(tenant, [
        assertion_data(predicate="billing_address", value=value, valid_from="2025-01-01T00:00:00Z")
        for value in ("1 Main St", "2 High St")
    ])

    assert sorted(r.outcome for r in results) == ["conflict", "created"]
    assert Conflict.objects.filter(tenant=tenant, status=Conflict.OPEN).count() == 1
    stored, rebuilt = projection_and_rebuild(tenant)
    assert stored == rebuilt


def race_dispatch(tenant, calls: list[tuple[str, dict]]) -> list:
    """``dispatch_once(webhook id, envelope)`` per call, all at once."""
    from facts.webhooks import dispatch_once

    return run_together([lambda c=c: dispatch_once(tenant, c[0], c[1], actor="test") for c in calls])


@pytest.mark.parametrize("same_webhook_id", [False, True])
def test_the_same_payload_sent_twice_at_once_is_stored_once(same_webhook_id):
    tenant = TenantFactory()
    for n in range(3):
        envelope = {"type": "fact.asserted", "timestamp": "2026-01-01T00:00:00Z",
                    "data": assertion_data(subject=f"u-{n}", predicate="employer", value="Acme", source_id="msg-1")}
        ids = ["msg_a", "msg_a"] if same_webhook_id else ["msg_a", "msg_b"]
        results = race_dispatch(tenant, [(f"{n}:{i}", envelope) for i in ids])

        assert [r[0] for r in results] == [200, 200], results
        bodies = [r[1] for r in results]
        assert bodies[0]["assertion_id"] == bodies[1]["assertion_id"]
        expected = ["created", "created"] if same_webhook_id else ["created", "duplicate"]
        assert sorted(b["outcome"] for b in bodies) == expected
        assert Assertion.objects.filter(tenant=tenant, subject__external_id=f"u-{n}").count() == 1


def test_the_same_batch_sent_again_while_the_first_is_written_gets_the_first_answers():
    """A client that retries a batch before its first request is answered
    gets the first answers (API.md, "Batch import": an id gets its first
    answer), not "duplicate" for every event of it."""
    from facts.webhooks import dispatch_batch

    tenant = TenantFactory()
    events = [{"id": f"e-{n}", "type": "fact.asserted",
               "data": assertion_data(subject=f"u-{n}", predicate="employer", value=f"Acme {n}", source_id=f"m-{n}")}
              for n in range(4)]
    results = run_together([lambda: dispatch_batch(tenant, events, actor="test") for _ in range(4)])

    assert not [r for r in results if isinstance(r, Exception)], results
    assert all(answers == results[0] for answers in results), results
    assert [status for status, _ in results[0]] == [200] * 4
    assert [body["outcome"] for _, body in results[0]] == ["created"] * 4
    assert Assertion.objects.filter(tenant=tenant).count() == 4
