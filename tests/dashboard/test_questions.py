"""Pending questions (the conflicts app's clarification prompts) on the
dashboard: answered in one click, with an htmx swap or without JavaScript;
another person's question is not found; answering twice changes nothing.

Runs when the conflicts app provides its prompt interface."""
from __future__ import annotations

import pytest

pytest.importorskip("conflicts.actions")

from django.test import Client  # noqa: E402
from playwright.sync_api import expect  # noqa: E402

from conflicts.models import ClarificationPrompt  # noqa: E402
from dashboard.accounts import account_user  # noqa: E402
from facts.models import Assertion, Event  # noqa: E402
from tests.dashboard.browser import LABEL_CHECK, shot, sign_in  # noqa: E402
from tests.dashboard.conftest import pending_question, seed_life  # noqa: E402

pytestmark = pytest.mark.django_db


def current_values(person, predicate: str) -> list:
    facts = person.agent.get(f"/subjects/{person.external_id}/facts", predicate=predicate)["facts"]
    return [f.get("value") for f in facts]


def ledger_counts() -> tuple:
    return (Assertion.objects.count(), Event.objects.count(),
            ClarificationPrompt.objects.filter(status="answered").count())


def test_answering_a_question_without_javascript_redirects_with_the_confirmation(person):
    prompt = pending_question(person)
    munich = next(o for o in prompt.options if o.get("value") == "Neue Str. 2, Munich")

    response = person.client.post(f"/questions/{prompt.id}/answer", {"choice": munich["assertion_id"]}, follow=True)

    assert ClarificationPrompt.objects.get(id=prompt.id).status == "answered"
    assert ClarificationPrompt.objects.get(id=prompt.id).confirmation in response.content.decode()
    assert current_values(person, "billing_address") == ["Neue Str. 2, Munich"]


def test_answering_twice_says_so_and_changes_nothing(person):
    prompt = pending_question(person)
    choice = prompt.options[0]["assertion_id"]
    person.client.post(f"/questions/{prompt.id}/answer", {"choice": choice})
    count = Assertion.objects.count()

    response = person.client.post(f"/questions/{prompt.id}/answer", {"choice": choice},
                                  headers={"HX-Request": "true"})

    assert "already answered or has expired" in response.content.decode()
    assert Assertion.objects.count() == count


def test_neither_answer_records_what_the_person_typed(person):
    prompt = pending_question(person)

    person.client.post(f"/questions/{prompt.id}/answer", {"choice": "neither", "value": "Hauptstr. 5, Hamburg"})

    assert current_values(person, "billing_address") == ["Hauptstr. 5, Hamburg"]


def test_htmx_answer_with_the_header_token_passes_csrf(person):
    prompt = pending_question(person)
    client = Client(enforce_csrf_checks=True)
    client.force_login(account_user(subject=person.subject))
    token = client.get("/").cookies["csrftoken"].value

    response = client.post(f"/questions/{prompt.id}/answer", {"choice": prompt.options[0]["assertion_id"]},
                           headers={"X-CSRFToken": token, "HX-Request": "true"})

    assert response.status_code == 200
    assert ClarificationPrompt.objects.get(id=prompt.id).status == "answered"


@pytest.mark.parametrize("other", ["neighbour", "stranger"])
def test_another_persons_question_is_not_found(request, person, other):
    prompt = pending_question(request.getfixturevalue(other))
    before = ledger_counts()

    response = person.client.post(f"/questions/{prompt.id}/answer", {"choice": prompt.options[0]["assertion_id"]})

    assert response.status_code == 404
    assert ClarificationPrompt.objects.get(id=prompt.id).status == "pending"
    assert ledger_counts() == before


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_answer_a_pending_question_and_the_page_updates_without_a_reload(page, live_server, person):
    seed_life(person)
    pending_question(person)
    sign_in(page, live_server, person)
    page.evaluate("window.__same_page = true")
    question = page.locator(".question")
    expect(question.locator(".question__text")).to_contain_text("Which is current?")
    expect(page.locator(".memory", has_text="Neue Str. 2")).to_have_class("memory memory--conflict")
    shot(page, "09-pending-question")

    question.get_by_role("button", name="Neue Str. 2, Munich").click()

    expect(page.locator(".confirmation")).to_be_visible()
    expect(page.locator(".question")).to_have_count(0)
    expect(page.locator(".memory--value", has_text="Neue Str. 2, Munich").locator(".memory__head .badge")).to_have_text(
        "you confirmed")
    assert page.evaluate("window.__same_page") is True
    shot(page, "10-question-answered")


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_question_controls_have_labels(page, live_server, person):
    pending_question(person)
    sign_in(page, live_server, person)

    assert page.evaluate(LABEL_CHECK) == []
