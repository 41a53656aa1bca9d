"""Answering prompts (API.md ``POST /prompts/<id>/answer``, the
``clarification.answered`` webhook, ``GET /subjects/<s>/prompts``): each
answer is a ``correction`` assertion with source id ``prompt:<id>``
(DESIGN.md, "The resolution function"); every refusal writes nothing."""
from datetime import timedelta

import pytest
import time_machine
from django.utils import timezone

from conflicts.actions import answer_prompt
from conflicts.models import ClarificationPrompt, ReviewTask
from conflicts.queries import reclassification_prompts
from facts.models import Assertion, Conflict
from tests.conflicts.conftest import counts, option_id
from tests.factories import assertion_data
from tests.conflicts.factories import ALTE, NEUE, change, tie

HAMBURG = "Hauptstr. 3, Hamburg"


def answer(agent, prompt, choice, **extra):
    return agent.api("POST", f"/prompts/{prompt.id}/answer", {"choice": choice, **extra})


def test_choosing_a_candidate_records_a_correction_and_resolves_the_conflict(agent, ask, inline_tasks):
    prompt = ask(agent, tie())

    with inline_tasks():
        response = answer(agent, prompt, option_id(prompt, value=NEUE), answered_by="u-1")
    body = response.json()
    correction = Assertion.objects.get(tenant=agent.tenant, source_kind="correction")
    facts = agent.get("/subjects/u-1/facts")["facts"]
    prompt.refresh_from_db()

    assert response.status_code == 200
    assert (body["outcome"], body["prompt_id"], body["conflict_id"]) == ("answered", str(prompt.id), str(prompt.conflict_id))
    assert body["confirmation"] == (f"I had both {ALTE} and {NEUE} since March; you chose {NEUE}; updated.")
    assert (correction.source_id, correction.actor, correction.value) == (f"prompt:{prompt.id}", "u-1", NEUE)
    assert (correction.valid_from, correction.valid_to) == (prompt.valid_from, prompt.valid_to)
    assert Conflict.objects.get(pk=prompt.conflict_id).status == Conflict.RESOLVED
    assert [(f["status"], f["value"]) for f in facts] == [("value", NEUE)]
    assert (prompt.status, prompt.answered_by, prompt.confirmation) == ("answered", "u-1", body["confirmation"])
    assert str(prompt.correction_assertion_id) == body["assertion_id"] == str(correction.id)


def test_neither_records_the_given_value_over_the_disputed_time(agent, ask):
    prompt = ask(agent, tie())

    response = answer(agent, prompt, {"value": HAMBURG})
    facts = agent.get("/subjects/u-1/facts")["facts"]

    assert response.status_code == 200
    assert response.json()["confirmation"].endswith(f"you said it is {HAMBURG}; updated.")
    assert [(f["value"], f["valid_from"], f["source"]["kind"]) for f in facts] == [
        (HAMBURG, "2026-03-01T00:00:00Z", "correction")]


def test_neither_since_a_later_time_answers_from_then_on_and_leaves_the_stretch_before(agent, ask):
    prompt = ask(agent, tie())

    response = answer(agent, prompt, {"value": HAMBURG, "valid_from": "2026-06-01T00:00:00Z"})
    april = agent.get("/subjects/u-1/facts", valid_at="2026-04-01T00:00:00Z")["facts"]
    july = agent.get("/subjects/u-1/facts", valid_at="2026-07-01T00:00:00Z")["facts"]

    assert response.status_code == 200
    assert [f["status"] for f in april] == ["conflict"]
    assert [(f["status"], f["value"]) for f in july] == [("value", HAMBURG)]


def test_both_keeps_the_conflict_and_asks_staff_to_reclassify_once_per_predicate(agent, ask):
    first = ask(agent, tie(subject="u-1"))
    second = ask(agent, tie(subject="u-2"))

    responses = [answer(agent, p, "both") for p in (first, second)]
    task = ReviewTask.objects.get(tenant=agent.tenant)
    facts = agent.get("/subjects/u-1/facts")["facts"]

    assert [r.status_code for r in responses] == [200, 200]
    assert [r.json()["rule"] for r in responses] == ["reclassification-requested"] * 2
    assert (task.kind, task.predicate, task.status) == ("reclassify_predicate", "billing_address", "open")
    assert [p.id for p in reclassification_prompts(task=task)] == [first.id, second.id]
    assert [f["status"] for f in facts] == ["conflict"]
    assert not Assertion.objects.filter(tenant=agent.tenant, source_kind="correction").exists()


def test_a_proposal_asks_to_confirm_and_confirming_applies_the_change(agent, ask):
    prompt = ask(agent, change())

    response = answer(agent, prompt, option_id(prompt, kind="confirm"))
    facts = agent.get("/subjects/u-1/facts")["facts"]

    assert prompt.question == "Update your payment method from card ending 1111 to card ending 2222?"
    assert (prompt.kind, prompt.stakes) == ("proposal", "high")
    assert response.status_code == 200
    assert [f["value"] for f in facts] == ["card ending 2222"]
    # The old card was held since its own start (March), not the change's (June).
    assert response.json()["confirmation"].startswith("I had card ending 1111 since March")


def test_confirming_one_of_two_changes_closes_the_other_question(agent, ask, inline_tasks):
    # Two changes from the same start: two proposals, two questions. Once
    # one is confirmed (a correction), the other is outranked where it
    # starts: no longer a pending change, and its question is withdrawn.
    data = change()
    red = assertion_data(subject="u-1", predicate="payment_method", value="card ending 3333",
                         valid_from="2026-06-01T00:00:00Z", source_id="payment_method-red")
    ask(agent, [*data, red])
    questions = ClarificationPrompt.objects.filter(tenant=agent.tenant, kind="proposal")
    green = questions.get(question__contains="2222")

    with inline_tasks():
        response = answer(agent, green, option_id(green, kind="confirm"))
    other = questions.get(question__contains="3333")
    history = agent.get("/subjects/u-1/history", predicate="payment_method")
    context = agent.get("/subjects/u-1/context")

    assert response.status_code == 200
    assert other.status not in ClarificationPrompt.OPEN_STATUSES
    assert [v["status"] for v in history["versions"] if v["value"] == "card ending 3333"] == ["overruled"]
    assert [(f["predicate"], f["value"]) for f in context["facts"]] == [("payment_method", "card ending 2222")]
    assert context["withheld"] == []


def test_keeping_the_old_value_retracts_the_proposal(agent, ask):
    prompt = ask(agent, change())

    response = answer(agent, prompt, option_id(prompt, kind="keep"))
    proposal = Assertion.objects.get(pk=prompt.proposal_assertion_id)
    context = agent.get("/subjects/u-1/context")

    assert response.status_code == 200
    assert response.json()["confirmation"].endswith("you kept it; the change to card ending 2222 is dropped.")
    assert proposal.retracted_at is not None and proposal.retracted_by == "api:" + agent.slug
    assert [(f["predicate"], f["value"]) for f in context["facts"]] == [("payment_method", "card ending 1111")]
    assert context["withheld"] == []


def test_neither_on_a_proposal_records_the_value_and_retracts_the_proposal(agent, ask):
    prompt = ask(agent, change())

    response = answer(agent, prompt, {"value": "card ending 3333"})
    facts = agent.get("/subjects/u-1/facts")["facts"]

    assert response.status_code == 200
    assert [f["value"] for f in facts] == ["card ending 3333"]
    assert Assertion.objects.get(pk=prompt.proposal_assertion_id).retracted_at is not None


def test_an_answer_the_system_of_record_outranks_is_not_called_an_update(agent, ask):
    """On a predicate a system of record owns, the person's "neither, it
    is …" is recorded but loses to it (write rule step 4): the reply says
    so, and that staff will check, instead of "updated"."""
    prompt = ask(agent, [
        assertion_data(predicate="billing_address", value="1 A St", kind="system_record", source_id="crm-1",
                       valid_from="2026-01-01T00:00:00Z"),
        assertion_data(predicate="billing_address", value="3 C St", kind="system_record", source_id="crm-2",
                       valid_from="2026-08-01T00:00:00Z"),
    ])

    response = answer(agent, prompt, {"value": "5 E St"})
    facts = agent.get("/subjects/u-1/facts")["facts"]

    assert prompt.kind == "proposal" and response.status_code == 200
    assert response.json()["rule"] == "system-of-record-authority"
    assert "updated" not in response.json()["confirmation"]
    assert "not used until staff have checked it" in response.json()["confirmation"]
    assert [f["value"] for f in facts] == ["1 A St"]
    assert ReviewTask.objects.filter(tenant=agent.tenant, kind=ReviewTask.SYSTEM_RECORD_FOLLOWUP).count() == 1


@pytest.mark.parametrize("choice, field", [
    ("not-an-id", "choice"),
    ("00000000-0000-4000-8000-000000000000", "choice"),
    (42, "choice"),
    ({"valid_from": "2026-03-01T00:00:00Z"}, "choice.value"),
    ({"value": ""}, "choice.value"),
    ({"value": HAMBURG, "valid_from": "2026-03-01T00:00:00"}, "choice.valid_from"),
])
def test_a_bad_choice_is_refused_naming_the_field_and_writes_nothing(agent, ask, choice, field):
    prompt = ask(agent, tie())
    before = counts(agent.tenant)

    response = answer(agent, prompt, choice)
    prompt.refresh_from_db()

    assert response.status_code == 400 and response.json()["field"] == field
    assert counts(agent.tenant) == before
    assert prompt.status == "pending"


def test_both_is_refused_where_it_is_not_offered(agent, ask):
    prompt = ask(agent, tie(predicate="legal_name", values=("Ann Smith", "Anna Smith")))
    before = counts(agent.tenant)

    response = answer(agent, prompt, "both")

    assert response.status_code == 400 and response.json()["field"] == "choice"
    assert counts(agent.tenant) == before


def test_an_unknown_prompt_is_404_and_writes_nothing(agent, ask):
    ask(agent, tie())
    before = counts(agent.tenant)

    response = agent.api("POST", "/prompts/00000000-0000-4000-8000-000000000000/answer", {"choice": "both"})

    assert response.status_code == 404
    assert counts(agent.tenant) == before


def test_another_tenants_prompt_is_404_and_writes_nothing(agent, other_agent, ask):
    prompt = ask(agent, tie())
    before = counts(agent.tenant), counts(other_agent.tenant)

    response = answer(other_agent, prompt, option_id(prompt, value=NEUE))
    read = other_agent.api("GET", f"/prompts/{prompt.id}")

    assert (response.status_code, read.status_code) == (404, 404)
    assert (counts(agent.tenant), counts(other_agent.tenant)) == before


def test_answering_twice_is_409_with_the_prompts_state(agent, ask):
    prompt = ask(agent, tie())
    first = answer(agent, prompt, option_id(prompt, value=NEUE))
    before = counts(agent.tenant)

    second = answer(agent, prompt, option_id(prompt, value=ALTE))

    assert first.status_code == 200
    assert second.status_code == 409
    assert {k: second.json()[k] for k in ("prompt_id", "status")} == {"prompt_id": str(prompt.id), "status": "answered"}
    assert second.json()["answered_at"] is not None
    assert counts(agent.tenant) == before


def test_answering_an_expired_prompt_is_409_and_the_conflict_stays(agent, ask):
    prompt = ask(agent, tie())
    before = counts(agent.tenant)

    with time_machine.travel(prompt.expires_at + timedelta(seconds=1)):
        response = answer(agent, prompt, option_id(prompt, value=NEUE))

    assert response.status_code == 409 and response.json()["status"] == "expired"
    assert counts(agent.tenant) == before
    assert [f["status"] for f in agent.get("/subjects/u-1/facts")["facts"]] == ["conflict"]


def test_the_clarification_answered_webhook_answers_and_a_second_answer_gets_409(agent, ask):
    prompt = ask(agent, tie())
    data = {"prompt_id": str(prompt.id), "choice": option_id(prompt, value=NEUE), "answered_by": "u-1"}

    first = agent.webhook("clarification.answered", data, webhook_id="msg_answer_1")
    replay = agent.webhook("clarification.answered", data, webhook_id="msg_answer_1")
    again = agent.webhook("clarification.answered", data, webhook_id="msg_answer_2")

    assert first.status_code == 200 and first.json()["outcome"] == "answered"
    assert replay.status_code == 200 and replay.json() == first.json()
    assert again.status_code == 409 and again.json()["status"] == "answered"
    assert Assertion.objects.filter(tenant=agent.tenant, source_kind="correction").count() == 1


@pytest.mark.parametrize("data, field", [
    ({"choice": "both"}, "data.prompt_id"),
    ({"prompt_id": "00000000-0000-4000-8000-000000000000"}, "data.choice"),
    ({"prompt_id": "nope", "choice": "both"}, "data.prompt_id"),
    ("a string", "data"),
])
def test_a_malformed_answer_webhook_is_400_and_writes_nothing(agent, ask, data, field):
    ask(agent, tie())
    before = counts(agent.tenant)

    response = agent.webhook("clarification.answered", data)

    assert response.status_code == 400 and response.json()["field"] == field
    assert counts(agent.tenant) == before


def test_an_answer_webhook_for_an_unknown_prompt_is_404_naming_it_and_writes_nothing(agent, ask):
    ask(agent, tie())
    before = counts(agent.tenant)

    response = agent.webhook("clarification.answered",
                             {"prompt_id": "0190f2a4-0000-7000-8000-000000000000", "choice": "both"})

    assert (response.status_code, response.json()["field"]) == (404, "data.prompt_id")
    assert counts(agent.tenant) == before


def test_prompts_are_listed_by_status(agent, ask):
    prompt = ask(agent, tie())
    pending = agent.get("/subjects/u-1/prompts", status="pending")["prompts"]
    answer(agent, prompt, option_id(prompt, value=NEUE))

    after = agent.get("/subjects/u-1/prompts")["prompts"]
    answered = agent.get("/subjects/u-1/prompts", status="answered")["prompts"]

    assert [(p["prompt_id"], p["stakes"]) for p in pending] == [(str(prompt.id), "high")]
    assert {"question", "options", "created_at", "expires_at"} <= set(pending[0])
    assert [(o["assertion_id"], o["value"]) for o in pending[0]["options"][:2]] == [
        (o["assertion_id"], o["value"]) for o in prompt.options[:2]]
    assert after == []
    assert [p["status"] for p in answered] == ["answered"]


def test_listing_refuses_a_bad_status_and_unknown_or_foreign_subjects(agent, other_agent, ask):
    ask(agent, tie())

    bad = agent.api("GET", "/subjects/u-1/prompts", status="bogus")
    unknown = agent.api("GET", "/subjects/nobody/prompts")
    foreign = other_agent.api("GET", "/subjects/u-1/prompts")

    assert (bad.status_code, bad.json()["field"]) == (400, "status")
    assert (unknown.status_code, foreign.status_code) == (404, 404)


def test_answer_prompt_returns_prompt_confirmation_and_write(agent, ask):
    prompt = ask(agent, tie())

    result = answer_prompt(tenant=agent.tenant, prompt_id=str(prompt.id), choice=option_id(prompt, value=ALTE),
                           answered_by="dashboard:u-1")

    assert result.prompt.status == ClarificationPrompt.ANSWERED
    assert result.confirmation == result.prompt.confirmation
    assert (result.write.outcome, result.write.prompt_id) == ("answered", str(prompt.id))
    assert result.prompt.answered_at <= timezone.now()
