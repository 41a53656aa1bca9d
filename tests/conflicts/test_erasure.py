"""Right to be forgotten reaches prompts, review tasks and outgoing payloads:
what the ledger erases is not kept in a question, an answer or the outbox."""
import json

from conflicts.models import ClarificationPrompt, OutboxMessage, ReviewTask
from facts.models import Assertion
from tests.conflicts.conftest import option_id
from tests.conflicts.factories import ALTE, NEUE, EndpointFactory, tie


def stored_text(tenant) -> str:
    prompts = list(ClarificationPrompt.objects.filter(tenant=tenant).values("question", "options", "answer", "confirmation"))
    tasks = list(ReviewTask.objects.filter(tenant=tenant).values("evidence", "result"))
    payloads = list(OutboxMessage.objects.filter(tenant=tenant).values_list("payload", flat=True))
    return json.dumps([prompts, tasks, payloads], default=str, ensure_ascii=False)


def test_erasing_a_candidate_scrubs_the_prompt_and_the_outbox(agent, ask):
    EndpointFactory(tenant=agent.tenant)
    prompt = ask(agent, tie())
    alte = Assertion.objects.get(tenant=agent.tenant, value=ALTE)
    quoted_before = ALTE in stored_text(agent.tenant)

    response = agent.api("POST", f"/assertions/{alte.id}/erase")
    prompt.refresh_from_db()

    assert response.status_code == 200
    assert quoted_before and ALTE not in stored_text(agent.tenant)
    assert (prompt.status, prompt.question) == ("withdrawn", "[erased]")


def test_erasing_a_subject_scrubs_answered_prompts_and_staff_tasks(agent, ask):
    EndpointFactory(tenant=agent.tenant)
    prompt = ask(agent, tie(predicate="email", values=("a@example.com", "b@example.com")))
    agent.api("POST", f"/prompts/{prompt.id}/answer", {"choice": "both"})
    other = ask(agent, tie(subject="u-2"))
    agent.api("POST", f"/prompts/{other.id}/answer", {"choice": option_id(other, value=NEUE)})

    response = agent.api("DELETE", "/subjects/u-1")
    text = stored_text(agent.tenant)

    assert response.status_code == 200
    assert "a@example.com" not in text and "b@example.com" not in text
    assert NEUE in text  # another person's answer is untouched
    assert ClarificationPrompt.objects.get(pk=prompt.pk).question == "[erased]"
