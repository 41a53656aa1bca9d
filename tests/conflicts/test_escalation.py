"""Escalation and expiry on a controlled clock (time-machine): unanswered
prompts go to the staff queue once, however often the periodic task runs;
expired prompts leave the earlier value in place."""
from datetime import timedelta

import time_machine

from conflicts import tasks
from conflicts.models import ClarificationPrompt, ReviewTask
from conflicts.queries import pending_prompts
from facts.models import Tenant
from tests.conflicts.conftest import option_id
from tests.conflicts.factories import NEUE, change, tie


def run(task, times: int) -> list:
    """Run a periodic task the way beat would, ``times`` times."""
    return [task.apply().get() for _ in range(times)]


def test_a_prompt_unanswered_past_the_tenants_delay_escalates_once(agent, ask):
    Tenant.objects.filter(pk=agent.tenant.pk).update(prompt_escalation_seconds=3600)
    prompt = ask(agent, tie())

    with time_machine.travel(prompt.created_at + timedelta(minutes=59)):
        early = run(tasks.escalate_prompts, 2)
    with time_machine.travel(prompt.created_at + timedelta(minutes=61)):
        due = run(tasks.escalate_prompts, 3)
    with time_machine.travel(prompt.created_at + timedelta(days=2)):
        later = run(tasks.escalate_prompts, 2)
    prompt.refresh_from_db()
    task = ReviewTask.objects.get(tenant=agent.tenant)

    assert (early, due, later) == ([0, 0], [1, 0, 0], [0, 0])
    assert prompt.status == "escalated"
    assert (task.kind, task.status, task.prompt_id, task.conflict_id) == (
        "escalated_prompt", "open", prompt.id, prompt.conflict_id)
    assert task.evidence["question"] == prompt.question
    assert [p.id for p in pending_prompts(subject=prompt.subject)] == [prompt.id]


def test_an_unanswered_proposal_escalates_as_a_high_stakes_confirmation(agent, ask):
    prompt = ask(agent, change())

    with time_machine.travel(prompt.escalate_at + timedelta(seconds=1)):
        run(tasks.escalate_prompts, 2)

    assert list(ReviewTask.objects.filter(tenant=agent.tenant).values_list("kind", "assertion_id")) == [
        ("high_stakes_confirmation", prompt.proposal_assertion_id)]


def test_answering_an_escalated_prompt_closes_its_staff_task(agent, ask):
    prompt = ask(agent, tie())
    with time_machine.travel(prompt.escalate_at + timedelta(seconds=1)):
        run(tasks.escalate_prompts, 1)

    response = agent.api("POST", f"/prompts/{prompt.id}/answer", {"choice": option_id(prompt, value=NEUE)})
    task = ReviewTask.objects.get(tenant=agent.tenant)

    assert response.status_code == 200
    assert (task.status, task.decision) == ("done", "closed")


def test_prompts_expire_once_and_the_earlier_value_stays(agent, ask):
    prompt = ask(agent, change())

    with time_machine.travel(prompt.expires_at - timedelta(seconds=1)):
        early = run(tasks.expire_prompts, 2)
    with time_machine.travel(prompt.expires_at + timedelta(seconds=1)):
        due = run(tasks.expire_prompts, 3)
        pending = pending_prompts(subject=prompt.subject)
        listed = agent.get("/subjects/u-1/prompts")["prompts"]
        facts = agent.get("/subjects/u-1/facts")["facts"]
        context = agent.get("/subjects/u-1/context")
    prompt.refresh_from_db()

    assert (early, due) == ([0, 0], [1, 0, 0])
    assert (prompt.status, pending, listed) == ("expired", [], [])
    assert [f["value"] for f in facts] == ["card ending 1111"]
    assert [f["value"] for f in context["facts"]] == ["card ending 1111"]


def test_escalation_and_expiry_run_together_leave_one_open_staff_task(agent, ask):
    prompt = ask(agent, tie())

    with time_machine.travel(prompt.expires_at + timedelta(seconds=1)):
        outcome = run(tasks.escalate_prompts, 1) + run(tasks.expire_prompts, 1) + run(tasks.escalate_prompts, 1)
    with time_machine.travel(prompt.escalate_at + timedelta(seconds=1)):
        escalated_late = run(tasks.escalate_prompts, 1)
    prompt.refresh_from_db()

    assert outcome == [0, 1, 0] and escalated_late == [0]
    assert prompt.status == ClarificationPrompt.EXPIRED
    assert ReviewTask.objects.filter(tenant=agent.tenant).count() == 0
