"""Memories settled by a decision: the person's answer to a question, or
support's decision in the console. The card and the history say who
decided and what, never "you corrected" for something the person did not
correct, nor the question in place of the answer."""
from __future__ import annotations

import pytest

pytest.importorskip("conflicts.actions")

from conflicts import actions as conflict_actions  # noqa: E402
from conflicts.models import ReviewTask  # noqa: E402

pytestmark = pytest.mark.django_db


def proposal(person):
    """A high-stakes change waiting for the person: billing address from 1 Main St to 2 High St."""
    person.remember(predicate="billing_address", value="1 Main St", valid_from="2026-03-03T00:00:00Z",
                    source={"kind": "user_statement", "id": "msg-1", "evidence": "Bill me at 1 Main St"})
    change = person.remember(predicate="billing_address", value="2 High St", valid_from="2026-11-22T00:00:00Z",
                             source={"kind": "user_statement", "id": "msg-2", "evidence": "I moved to 2 High St"})
    assert change["outcome"] == "proposed"
    return conflict_actions.open_proposal_prompt(tenant_id=person.subject.tenant_id,
                                                 assertion_id=change["assertion_id"])


def test_a_confirmed_change_says_the_person_confirmed_it_and_what_they_chose(person):
    prompt = proposal(person)
    confirm = next(o for o in prompt.options if o["kind"] == "confirm")
    person.client.post(f"/questions/{prompt.id}/answer", {"choice": confirm["assertion_id"]})

    html = person.client.get("/").content.decode()
    card = html[html.index("2 High St"):]
    card = card[:card.index("</li>")]

    assert '<span class="badge badge--corrected">you confirmed</span>' in card
    assert "You chose “2 High St” when I asked: Update your billing address" in card
    assert "you corrected" not in card and "Answer to:" not in card


def test_a_staff_decision_on_a_follow_up_is_not_told_as_the_persons_correction(person):
    person.remember(predicate="plan", value="Pro", valid_from="2026-01-01T00:00:00Z",
                    source={"kind": "system_record", "id": "billing:sub-1", "evidence": "plan=pro"})
    statement = person.remember(predicate="plan", value="Basic", valid_from="2026-02-01T00:00:00Z",
                                source={"kind": "user_statement", "id": "msg-3", "evidence": "I am on Basic"})
    task = ReviewTask.objects.get(tenant=person.agent.tenant, kind=ReviewTask.SYSTEM_RECORD_FOLLOWUP)
    conflict_actions.decide_review_task(tenant=person.agent.tenant, task_id=str(task.id), decision="confirm",
                                        note="called the customer", actor="ops@example.com")

    history = person.client.get(f"/memories/{statement['assertion_id']}/").content.decode()
    activity = person.client.get("/activity/").content.decode()

    assert "Support confirmed “Basic”" in history
    assert "support confirmed" in activity
    assert "You corrected" not in history and "you corrected" not in activity
