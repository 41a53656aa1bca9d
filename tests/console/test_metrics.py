"""The overview's "How conflicts were resolved": classified by what settled
each conflict (its question answered, a person's correction, a staff
decision; the tie rule; otherwise later data), whatever the channel and
whatever the actor's name, in a fixed number of queries."""
from __future__ import annotations

from datetime import timedelta

import pytest
import time_machine
from django.db import connection
from django.test.utils import CaptureQueriesContext

from conflicts import actions as conflict_actions
from conflicts.models import ReviewTask
from console import metrics, services
from facts.models import Assertion
from tests.conflicts.conftest import ask, inline_tasks, option_id  # noqa: F401  (fixtures)
from tests.conflicts.factories import NEUE, tie
from tests.factories import assertion_data

pytestmark = pytest.mark.django_db

HAMBURG = "Hauptstr. 3, Hamburg"


def resolved_by(agent) -> dict:
    return metrics.tenant_metrics(tenant=agent.tenant).resolved_by


ANSWERS = {
    "api, answered_by a person's id": lambda agent, prompt: agent.api(
        "POST", f"/prompts/{prompt.id}/answer", {"choice": option_id(prompt, value=NEUE), "answered_by": "u-1"}),
    "api, no answered_by": lambda agent, prompt: agent.api(
        "POST", f"/prompts/{prompt.id}/answer", {"choice": option_id(prompt, value=NEUE)}),
    "api, neither": lambda agent, prompt: agent.api(
        "POST", f"/prompts/{prompt.id}/answer", {"choice": {"value": HAMBURG}}),
    "webhook": lambda agent, prompt: agent.webhook(
        "clarification.answered",
        {"prompt_id": str(prompt.id), "choice": option_id(prompt, value=NEUE), "answered_by": "Anna at the front desk"}),
}


@pytest.mark.parametrize("answer", ANSWERS.values(), ids=ANSWERS.keys())
def test_an_answered_question_counts_as_people_whatever_the_channel(agent, ask, answer):
    prompt = ask(agent, tie())

    response = answer(agent, prompt)

    assert response.status_code == 200, response.content
    assert resolved_by(agent) == {"rule": 0, "people": 1, "later data": 0}


def test_a_correction_through_the_api_counts_as_people(agent, ask):
    ask(agent, tie())

    agent.assert_fact(assertion_data(predicate="billing_address", value=HAMBURG, kind="correction",
                                     valid_from="2026-03-01T00:00:00Z", source_id="support-call-1"))

    assert resolved_by(agent) == {"rule": 0, "people": 1, "later data": 0}


def test_a_retraction_counts_as_later_data_whoever_made_it(agent, ask):
    ask(agent, tie(subject="u-1"))
    ask(agent, tie(subject="u-2"))
    by_api = Assertion.objects.get(tenant=agent.tenant, subject__external_id="u-1", value=NEUE)

    agent.api("POST", f"/assertions/{by_api.id}/retract", {"reason": "wrong person"})
    services.revoke(tenant=agent.tenant, selection=services.Selection(source_id_prefix="msg-billing_address-1"),
                    reason="faulty import", actor="staff:ops")

    assert resolved_by(agent) == {"rule": 0, "people": 0, "later data": 2}


def test_a_low_stakes_tie_counts_as_rule(agent, ask):
    ask(agent, tie(predicate="employer", values=("Acme", "Initech")))

    assert resolved_by(agent) == {"rule": 1, "people": 0, "later data": 0}


def test_the_overview_costs_the_same_queries_for_one_conflict_or_many(agent, ask):
    def answered(subject: str) -> None:
        prompt = ask(agent, tie(subject=subject))
        agent.api("POST", f"/prompts/{prompt.id}/answer", {"choice": option_id(prompt, value=NEUE)})
        ask(agent, tie(subject=subject, predicate="employer", values=("Acme", "Initech")))

    answered("u-1")
    with CaptureQueriesContext(connection) as one:
        metrics.tenant_metrics(tenant=agent.tenant)
    for i in range(2, 6):
        answered(f"u-{i}")
    with CaptureQueriesContext(connection) as many:
        by = metrics.tenant_metrics(tenant=agent.tenant).resolved_by

    assert by == {"rule": 5, "people": 5, "later data": 0}
    assert len(many) == len(one)


def test_a_staff_decision_on_an_escalated_conflict_counts_as_people(agent, ask):
    prompt = ask(agent, tie())
    with time_machine.travel(prompt.escalate_at + timedelta(seconds=1)):
        conflict_actions.escalate_prompts()
    task = ReviewTask.objects.get(tenant=agent.tenant, prompt=prompt)

    conflict_actions.decide_review_task(tenant=agent.tenant, task_id=str(task.id), decision="reject",
                                        choice=option_id(prompt, value=NEUE), note="called them", actor="ops")

    assert resolved_by(agent) == {"rule": 0, "people": 1, "later data": 0}


def test_the_questions_asked_are_accounted_for(agent, ask):
    """Asked = answered + expired + withdrawn + still open (escalation is
    a step on the way, counted beside them)."""
    answered = ask(agent, tie(subject="u-1"))
    agent.api("POST", f"/prompts/{answered.id}/answer", {"choice": option_id(answered, value=NEUE)})
    withdrawn = ask(agent, tie(subject="u-2"))
    agent.assert_fact(assertion_data(subject="u-2", predicate="billing_address", value=HAMBURG, kind="correction",
                                     valid_from="2026-03-01T00:00:00Z", source_id="fix-u-2"))
    ask(agent, tie(subject="u-3"))

    counts = metrics.tenant_metrics(tenant=agent.tenant).prompts
    withdrawn.refresh_from_db()

    assert withdrawn.status == "withdrawn"
    assert (counts["asked"], counts["answered"], counts["withdrawn"], counts["expired"], counts["pending"]) == (
        3, 1, 1, 0, 1)
    assert counts["asked"] == counts["answered"] + counts["withdrawn"] + counts["expired"] + counts["pending"]
