"""Refusals: CSRF on every state-changing request, and one person cannot
reach another's memory, question or export by changing an id in the URL.
Every refusal writes nothing (row counts before and after)."""
from __future__ import annotations

import uuid
from urllib.parse import urlsplit

import pytest
from django.test import Client

from dashboard.accounts import account_user
from facts.models import Assertion, Event, LoginLink

pytestmark = pytest.mark.django_db


def ledger_counts() -> tuple:
    return (Assertion.objects.count(), Assertion.objects.filter(retracted_at__isnull=False).count(),
            Assertion.objects.filter(erased_at__isnull=False).count(), Event.objects.count(),
            LoginLink.objects.filter(used_at__isnull=False).count())


def strict_client(person) -> Client:
    client = Client(enforce_csrf_checks=True)
    client.force_login(account_user(subject=person.subject))
    return client


def test_every_state_changing_request_without_a_csrf_token_is_403(person):
    memory = person.remember(predicate="city_of_residence", value="Berlin")["assertion_id"]
    link = urlsplit(person.agent.api("POST", f"/subjects/{person.external_id}/login-link").json()["url"]).path
    posts = [
        (f"/memories/{memory}/correct", {"value": "Munich", "since": "2025-11-22"}),
        (f"/memories/{memory}/retract", {"reason": "no"}),
        (f"/memories/{memory}/erase", {"confirm": "on"}),
        (f"/questions/{uuid.uuid4()}/answer", {"choice": str(uuid.uuid4())}),
        ("/your-data/forget-everything", {"confirm": "on"}),
        ("/logout/", {}),
        (link, {}),
        ("/login/", {"username": "x", "password": "y"}),
    ]
    client = strict_client(person)
    before = ledger_counts()

    statuses = [client.post(url, data).status_code for url, data in posts]

    assert statuses == [403] * len(posts)
    assert ledger_counts() == before
    assert client.get("/").status_code == 200  # still signed in: logout was refused too


@pytest.mark.parametrize("other", ["neighbour", "stranger"])
def test_another_persons_memory_is_not_found(request, person, other):
    theirs = request.getfixturevalue(other).remember(predicate="city_of_residence", value="Lisbon")["assertion_id"]
    before = ledger_counts()

    responses = [
        person.client.get(f"/memories/{theirs}/"),
        person.client.post(f"/memories/{theirs}/correct", {"value": "Porto", "since": "2025-01-01"}),
        person.client.post(f"/memories/{theirs}/retract", {"reason": "mine now"}),
        person.client.post(f"/memories/{theirs}/erase", {"confirm": "on"}),
    ]

    assert [r.status_code for r in responses] == [404, 404, 404, 404]
    assert ledger_counts() == before


def test_export_holds_only_the_signed_in_person(person, neighbour):
    person.remember(predicate="city_of_residence", value="Berlin")
    neighbour.remember(predicate="city_of_residence", value="Lisbon")

    body = person.client.get(f"/your-data/export.json?subject={neighbour.external_id}").content.decode()

    assert "Berlin" in body
    assert "Lisbon" not in body
    assert neighbour.external_id not in body


def test_another_persons_memory_does_not_appear_in_lists_or_activity(person, neighbour):
    neighbour.remember(predicate="note", value="secret hobby of the neighbour")

    pages = [person.client.get(url).content.decode() for url in ("/", "/activity/", "/?q=secret")]

    assert all("secret hobby" not in page for page in pages)
