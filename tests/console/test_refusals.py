"""Every refusal writes nothing: a forbidden role, another tenant's id
(404 under one's own tenant), bad form input, a missing CSRF token.
Row counts are compared before and after."""
from __future__ import annotations

import uuid

import pytest

from conflicts.models import Delivery, ReviewTask
from console.models import AuditEntry, Revocation, StaffMembership
from facts.models import ApiKey, Assertion, Event, PredicatePolicy, SourceRanking, WebhookSecret
from tests.conftest import make_tenant_client
from tests.console.factories import MembershipFactory, client_for, csrf_client_for, failed_delivery, proposal_task
from tests.factories import assertion_data

pytestmark = pytest.mark.django_db

MODELS = (Assertion, Event, ReviewTask, PredicatePolicy, SourceRanking, WebhookSecret, ApiKey, Revocation)


def counts(tenant) -> dict:
    return {m.__name__: m.objects.filter(tenant=tenant).count() for m in MODELS} | {
        "retracted": Assertion.objects.filter(tenant=tenant, retracted_at__isnull=False).count(),
        "revoked_keys": ApiKey.objects.filter(tenant=tenant, revoked_at__isnull=False).count(),
        "decided": ReviewTask.objects.filter(tenant=tenant, status="done").count(),
        "failed": Delivery.objects.filter(tenant=tenant, status="failed").count(),
    }


@pytest.fixture
def other(world):
    """Another tenant with its own admin, review task, delivery and key."""
    tenant_client = make_tenant_client()
    task = proposal_task(tenant_client, subject="u-other")
    return {"client": client_for(MembershipFactory(tenant=tenant_client.tenant, role=StaffMembership.ADMIN).user),
            "slug": tenant_client.slug, "tenant": tenant_client.tenant, "task": task,
            "delivery": failed_delivery(tenant_client.tenant),
            "key": ApiKey.objects.filter(tenant=tenant_client.tenant).first()}


FOREIGN = [
    ("GET", "queue/{task}/", {}),
    ("POST", "queue/{task}/decide", {"decision": "confirm", "note": "x"}),
    ("GET", "subjects/{subject}/", {}),
    ("GET", "revocations/{batch}/", {}),
    ("POST", "revocations/{batch}/undo", {}),
    ("POST", "webhooks/deliveries/{delivery}/replay", {}),
    ("POST", "keys/{key}/revoke", {}),
]


@pytest.mark.parametrize(("method", "template", "body"), FOREIGN, ids=[f"{m} {t}" for m, t, _ in FOREIGN])
def test_another_tenants_id_is_not_found_and_nothing_changes(world, other, method, template, body):
    url = f"/console/{other['slug']}/" + template.format(task=world.task.id, subject=world.subject, batch=world.batch,
                                                          delivery=world.delivery.id, key=world.key_id)
    before = counts(world.agent.tenant), counts(other["tenant"])

    response = getattr(other["client"], method.lower())(url, body)

    assert response.status_code == 404
    assert (counts(world.agent.tenant), counts(other["tenant"])) == before


BAD_INPUT = [
    ("queue/{task}/decide", {"decision": "maybe", "note": "x"}),
    ("queue/{task}/decide", {"decision": "confirm", "note": ""}),
    ("revocations/revoke", {"reason": "no criteria", "expected": 1}),
    ("revocations/revoke", {"extractor": "faulty@1", "reason": "", "expected": 1}),
    ("revocations/revoke", {"extractor": "nobody@0", "reason": "nothing matches", "expected": 1}),
    ("revocations/revoke", {"recorded_from": "2026-02-01", "recorded_to": "2026-01-01", "reason": "x", "expected": 1}),
    ("policy/predicate", {"predicate": "Bad Name", "cardinality": "one", "stakes": "low", "authority": "user"}),
    ("policy/predicate", {"predicate": "employer", "cardinality": "three", "stakes": "low", "authority": "user"}),
    ("policy/predicate", {"predicate": "employer", "cardinality": "one", "stakes": "low", "authority": "user",
                          "ttl_seconds": "0"}),
    ("policy/ranking", {f"rank_{i}": "correction" for i in range(5)}),
    ("webhooks/rotate", {"overlap_hours": "-1"}),
    ("keys/create", {"name": ""}),
]


@pytest.mark.parametrize(("template", "body"), BAD_INPUT, ids=[f"{t} {sorted(b.items())}"[:80] for t, b in BAD_INPUT])
def test_bad_form_input_is_refused_with_400_and_nothing_changes(world, people, template, body):
    url = f"/console/{world.slug}/" + template.format(task=world.task.id)
    before = counts(world.agent.tenant)

    response = people["admin"].post(url, body)

    assert response.status_code == 400
    assert counts(world.agent.tenant) == before


def test_a_changed_selection_is_refused_with_nothing_written(world, people):
    before = counts(world.agent.tenant)

    response = people["admin"].post(f"/console/{world.slug}/revocations/revoke",
                                    {"source_kind": "user_statement", "reason": "x", "expected": 1})

    assert response.status_code == 400
    assert b"Check the new preview" in response.content
    assert counts(world.agent.tenant) == before


FORBIDDEN = [
    ("revocations/revoke", {"extractor": "chat", "reason": "x", "expected": 1}),
    ("revocations/{batch}/undo", {}),
    ("policy/predicate", {"predicate": "employer", "cardinality": "many", "stakes": "low", "authority": "user"}),
    ("keys/create", {"name": "sneaky"}),
    ("keys/{key}/revoke", {}),
    ("webhooks/rotate", {"overlap_hours": "1"}),
]


@pytest.mark.parametrize(("template", "body"), FORBIDDEN, ids=[t for t, _ in FORBIDDEN])
def test_a_support_agent_cannot_do_admin_work(world, people, template, body):
    url = f"/console/{world.slug}/" + template.format(batch=world.batch, key=world.key_id)
    before = counts(world.agent.tenant)

    response = people["agent"].post(url, body)

    assert response.status_code == 403
    assert counts(world.agent.tenant) == before


def test_csrf_is_enforced_on_console_posts(world):
    admin = csrf_client_for(MembershipFactory(tenant=world.agent.tenant, role=StaffMembership.ADMIN).user)
    before = counts(world.agent.tenant)

    response = admin.post(f"/console/{world.slug}/keys/create", {"name": "no token"})

    assert response.status_code == 403
    assert counts(world.agent.tenant) == before


def test_the_audit_log_records_who_what_when_and_from_where(world, people):
    people["admin"].post(f"/console/{world.slug}/keys/create", {"name": "ci"}, REMOTE_ADDR="203.0.113.7")
    people["end_user"].post("/logout/")

    staff_entry = AuditEntry.objects.get(action="console:create_key")
    end_user_entry = AuditEntry.objects.get(action="dashboard:logout")
    csv = people["admin"].get(f"/console/{world.slug}/audit.csv", {"action": "create_key"})
    lines = b"".join(csv.streaming_content).decode().splitlines()

    assert (staff_entry.role, staff_entry.ip, staff_entry.status_code, staff_entry.tenant_id) == (
        "admin", "203.0.113.7", 200, world.agent.tenant.id)
    assert set(staff_entry.detail) == {"key_id", "prefix"}
    assert (end_user_entry.role, end_user_entry.tenant_id) == ("end_user", world.agent.tenant.id)
    assert lines[0].startswith("at,actor,role,action")
    assert len(lines) == 2


def test_a_review_decision_goes_through_the_ledger_as_a_correction(world, people):
    response = people["agent"].post(f"/console/{world.slug}/queue/{world.task.id}/decide",
                                    {"decision": "confirm", "note": "called them"})
    world.task.refresh_from_db()

    assert response.status_code == 302
    assert (world.task.status, world.task.decision, world.task.decision_note) == ("done", "confirm", "called them")
    assert Assertion.objects.filter(tenant=world.agent.tenant, source_kind="correction",
                                    actor__startswith="staff:").count() == 1


def test_unknown_ids_are_404(world, people):
    assert people["admin"].get(f"/console/{world.slug}/queue/{uuid.uuid4()}/").status_code == 404


def test_confirming_a_follow_up_says_the_system_of_record_still_decides(world, people):
    agent = world.agent
    agent.api("PUT", "/predicates/legal_name", {"cardinality": "one", "stakes": "high", "authority": "system_record"})
    agent.assert_fact(assertion_data(subject=world.subject, predicate="legal_name", value="Anna Schmidt",
                                     kind="system_record", valid_from="2020-01-01T00:00:00Z"))
    agent.assert_fact(assertion_data(subject=world.subject, predicate="legal_name", value="Anna Müller",
                                     valid_from="2026-11-01T00:00:00Z"))
    task = ReviewTask.objects.get(tenant=agent.tenant, kind=ReviewTask.SYSTEM_RECORD_FOLLOWUP)

    response = people["agent"].post(f"/console/{world.slug}/queue/{task.id}/decide",
                                    {"decision": "confirm", "note": "asked them"}, follow=True)

    assert b"the current answer has not changed" in response.content
    assert b"now reflects it" not in response.content


@pytest.mark.parametrize("note", ["", "   "])
def test_a_decision_without_a_note_is_refused_with_a_message_and_writes_nothing(world, people, note):
    url = f"/console/{world.slug}/queue/{world.task.id}/"
    assert "Note for the record (required)" in people["agent"].get(url).content.decode()
    before = counts(world.agent.tenant)

    response = people["agent"].post(f"{url}decide", {"decision": "reject", "note": note})

    assert response.status_code == 400
    assert "Write a note for the record: why you decided this. Nothing was recorded." in response.content.decode()
    assert counts(world.agent.tenant) == before
    # The audit log keeps the refused attempt (every state-changing request), as refused.
    assert list(AuditEntry.objects.filter(path=f"{url}decide").values_list("status_code", flat=True)) == [400]
