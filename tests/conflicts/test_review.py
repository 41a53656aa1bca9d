"""The staff queue (conflicts.actions.decide_review_task): every decision
goes through the ledger as a correction, a retraction or a policy version;
every refusal writes nothing."""
from datetime import timedelta

import pytest
import time_machine

from conflicts import actions
from conflicts.models import ReviewTask
from facts.errors import NotFound, StateConflict
from facts.inputs import InputError
from facts.models import Assertion, Conflict, PredicatePolicy
from tests.conflicts.conftest import counts, option_id
from tests.conflicts.factories import ALTE, NEUE, change, tie
from tests.factories import assertion_data


def escalated(agent, ask, payloads):
    prompt = ask(agent, payloads)
    with time_machine.travel(prompt.escalate_at + timedelta(seconds=1)):
        actions.escalate_prompts()
    return prompt, ReviewTask.objects.get(tenant=agent.tenant, prompt=prompt)


def decide(agent, task, decision, **kw):
    return actions.decide_review_task(tenant=agent.tenant, task_id=str(task.id), decision=decision,
                                      note=kw.pop("note", "called the customer"), actor="ops@example.com", **kw)


def test_staff_settle_an_escalated_conflict_with_a_correction(agent, ask):
    prompt, task = escalated(agent, ask, tie())

    decision = decide(agent, task, "confirm", choice=option_id(prompt, value=NEUE))
    prompt.refresh_from_db()
    correction = Assertion.objects.get(tenant=agent.tenant, source_kind="correction")

    assert [f["value"] for f in agent.get("/subjects/u-1/facts")["facts"]] == [NEUE]
    assert (correction.source_id, correction.actor) == (f"prompt:{prompt.id}", "staff:ops@example.com")
    assert (prompt.status, prompt.answered_by) == ("answered", "staff:ops@example.com")
    assert (decision.task.status, decision.task.decision, decision.task.decision_note) == (
        "done", "confirm", "called the customer")
    assert decision.task.result["assertion_id"] == str(correction.id)


def test_staff_reject_a_wrong_candidate_by_retracting_it(agent, ask):
    prompt, task = escalated(agent, ask, tie())
    wrong = option_id(prompt, value=ALTE)

    decision = decide(agent, task, "reject", choice=wrong)
    prompt.refresh_from_db()

    assert Assertion.objects.get(pk=wrong).retracted_by == "staff:ops@example.com"
    assert [f["value"] for f in agent.get("/subjects/u-1/facts")["facts"]] == [NEUE]
    assert prompt.status == "withdrawn"
    assert (decision.task.status, decision.task.decision) == ("done", "reject")


def test_staff_confirm_or_reject_a_high_stakes_change(agent, ask):
    confirmed_prompt, confirmed = escalated(agent, ask, change(subject="u-1"))
    rejected_prompt, rejected = escalated(agent, ask, change(subject="u-2"))

    decide(agent, confirmed, "confirm")
    decide(agent, rejected, "reject")

    assert [f["value"] for f in agent.get("/subjects/u-1/facts")["facts"]] == ["card ending 2222"]
    assert [f["value"] for f in agent.get("/subjects/u-2/facts")["facts"]] == ["card ending 1111"]
    assert Assertion.objects.get(pk=rejected_prompt.proposal_assertion_id).retracted_at is not None


def test_an_expired_prompt_can_still_be_decided_by_staff(agent, ask):
    prompt, task = escalated(agent, ask, tie())

    with time_machine.travel(prompt.expires_at + timedelta(seconds=1)):
        actions.expire_prompts()
        decide(agent, task, "confirm", choice={"value": NEUE})
    correction = Assertion.objects.get(tenant=agent.tenant, source_kind="correction")
    prompt.refresh_from_db()

    assert prompt.status == "expired"
    assert correction.source_id == f"review:{task.id}"


def plan_overruled(agent, *, subject="u-1"):
    agent.assert_fact(assertion_data(subject=subject, predicate="plan", value="pro", kind="system_record",
                                     valid_from="2026-01-01T00:00:00Z", source_id=f"billing-{subject}"))
    return agent.assert_fact(assertion_data(subject=subject, predicate="plan", value="basic",
                                            valid_from="2026-02-01T00:00:00Z", source_id=f"chat-{subject}"))


def test_a_statement_overruled_by_the_system_of_record_opens_one_followup(agent):
    statement = plan_overruled(agent)
    task = ReviewTask.objects.get(tenant=agent.tenant)

    assert statement["outcome"] == "overruled"
    assert (task.kind, str(task.assertion_id), task.predicate) == ("system_record_followup", statement["assertion_id"], "plan")
    assert task.evidence["statement"]["value"] == "basic" and task.evidence["system_record"]["value"] == "pro"


def test_a_followup_is_opened_once_whatever_the_arrival_order(agent):
    agent.assert_fact(assertion_data(predicate="plan", value="basic", valid_from="2026-02-01T00:00:00Z",
                                     source_id="chat-1"))
    agent.assert_fact(assertion_data(predicate="plan", value="pro", kind="system_record",
                                     valid_from="2026-01-01T00:00:00Z", source_id="billing-1"))
    agent.assert_fact(assertion_data(predicate="plan", value="pro", kind="system_record",
                                     valid_from="2026-01-01T00:00:00Z", source_id="billing-2"))

    assert list(ReviewTask.objects.filter(tenant=agent.tenant).values_list("kind", flat=True)) == [
        "system_record_followup"]


def test_confirming_a_followup_records_the_persons_value_without_a_new_followup(agent):
    plan_overruled(agent)
    task = ReviewTask.objects.get(tenant=agent.tenant)

    decision = decide(agent, task, "confirm")
    correction = Assertion.objects.get(tenant=agent.tenant, source_kind="correction")

    assert (correction.value, correction.source_id) == ("basic", f"review:{task.id}")
    assert decision.write.outcome == "overruled"
    assert ReviewTask.objects.filter(tenant=agent.tenant).count() == 1
    assert [f["value"] for f in agent.get("/subjects/u-1/facts")["facts"]] == ["pro"]


def test_rejecting_a_followup_retracts_the_statement(agent):
    statement = plan_overruled(agent)
    task = ReviewTask.objects.get(tenant=agent.tenant)

    decide(agent, task, "reject")

    assert Assertion.objects.get(pk=statement["assertion_id"]).retracted_at is not None


def test_confirming_a_reclassification_makes_the_predicate_multi_valued(agent, ask):
    prompt = ask(agent, tie(predicate="email", values=("a@example.com", "b@example.com")))
    agent.api("POST", f"/prompts/{prompt.id}/answer", {"choice": "both"})
    task = ReviewTask.objects.get(tenant=agent.tenant, kind="reclassify_predicate")

    decision = decide(agent, task, "confirm")
    policy = PredicatePolicy.objects.filter(tenant=agent.tenant, predicate="email").latest("recorded_at")
    facts = agent.get("/subjects/u-1/facts")["facts"]

    assert (policy.cardinality, policy.stakes, policy.recorded_by) == ("many", "high", "staff:ops@example.com")
    assert decision.policy["predicate"] == "email"
    assert Conflict.objects.get(pk=prompt.conflict_id).status == "RESOLVED"
    assert sorted(f["value"] for f in facts) == ["a@example.com", "b@example.com"]


def test_rejecting_a_reclassification_asks_the_person_again_without_both(agent, ask):
    prompt = ask(agent, tie(predicate="email", values=("a@example.com", "b@example.com")))
    agent.api("POST", f"/prompts/{prompt.id}/answer", {"choice": "both"})
    task = ReviewTask.objects.get(tenant=agent.tenant, kind="reclassify_predicate")

    decide(agent, task, "reject")
    prompt.refresh_from_db()

    assert (prompt.status, prompt.answer) == ("pending", None)
    assert [o["kind"] for o in prompt.options] == ["candidate", "candidate", "neither"]
    assert agent.api("POST", f"/prompts/{prompt.id}/answer", {"choice": "both"}).status_code == 400


def test_deciding_twice_is_refused_with_the_tasks_state(agent, ask):
    prompt, task = escalated(agent, ask, tie())
    decide(agent, task, "confirm", choice=option_id(prompt, value=NEUE))
    before = counts(agent.tenant)

    with pytest.raises(StateConflict) as refused:
        decide(agent, task, "reject", choice=option_id(prompt, value=ALTE))

    assert refused.value.state["status"] == "done" and refused.value.state["decision"] == "confirm"
    assert counts(agent.tenant) == before


@pytest.mark.parametrize("decision, kw, error", [
    ("maybe", {}, InputError),
    ("confirm", {}, InputError),
    ("reject", {"choice": {"value": "x"}}, InputError),
    ("confirm", {"choice": "00000000-0000-4000-8000-000000000000"}, InputError),
])
def test_bad_decisions_are_refused_and_write_nothing(agent, ask, decision, kw, error):
    _, task = escalated(agent, ask, tie())
    before = counts(agent.tenant)

    with pytest.raises(error):
        decide(agent, task, decision, **kw)

    assert counts(agent.tenant) == before
    assert ReviewTask.objects.get(pk=task.pk).status == "open"


def test_another_tenants_task_is_not_found_and_nothing_is_written(agent, other_agent, ask):
    prompt, task = escalated(agent, ask, tie())
    before = counts(agent.tenant), counts(other_agent.tenant)

    with pytest.raises(NotFound):
        decide(other_agent, task, "confirm", choice=option_id(prompt, value=NEUE))

    assert (counts(agent.tenant), counts(other_agent.tenant)) == before


@pytest.mark.parametrize("retracted", ["statement", "system_record"])
def test_a_followup_closes_when_what_it_is_about_is_retracted(agent, retracted):
    statement = plan_overruled(agent)
    task = ReviewTask.objects.get(tenant=agent.tenant)
    target = statement["assertion_id"] if retracted == "statement" else task.evidence["system_record"]["assertion_id"]

    agent.api("POST", f"/assertions/{target}/retract", {"reason": "never true"})
    task.refresh_from_db()

    assert (task.status, task.decision, task.decided_by) == ("done", "closed", "system")
    assert "retracted" in task.decision_note
    with pytest.raises(StateConflict):
        decide(agent, task, "confirm")


def test_rejecting_a_followup_is_recorded_as_staff_decided_it(agent):
    plan_overruled(agent)
    task = ReviewTask.objects.get(tenant=agent.tenant)

    decide(agent, task, "reject")  # retracts the statement, which would close the task by itself
    task.refresh_from_db()

    assert (task.status, task.decision, task.decided_by) == ("done", "reject", "ops@example.com")


def test_a_retraction_elsewhere_leaves_the_followup_open(agent):
    plan_overruled(agent)
    other = agent.assert_fact(assertion_data(predicate="pet", value="cat"))

    agent.api("POST", f"/assertions/{other['assertion_id']}/retract", {"reason": "never true"})

    assert ReviewTask.objects.get(tenant=agent.tenant).status == "open"
