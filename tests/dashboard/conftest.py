"""Fixtures for the dashboard: a person (a subject with a signed-in end-user
account) whose memories arrive through the agent's signed webhooks."""
from __future__ import annotations

import uuid
from dataclasses import dataclass

import pytest
from django.test import Client

from tests.conftest import TenantClient
from tests.factories import assertion_data


@dataclass
class Person:
    """One end user: their agent, their subject id and a signed-in client."""

    agent: TenantClient
    external_id: str
    client: Client

    @property
    def subject(self):
        from facts.models import Subject

        return Subject.objects.get(tenant__slug=self.agent.slug, external_id=self.external_id)

    def remember(self, predicate: str = "note", value="likes painting", **extra) -> dict:
        """Send one assertion about this person through the signed webhook."""
        return self.agent.assert_fact(assertion_data(subject=self.external_id, predicate=predicate, value=value, **extra))


def make_person(agent: TenantClient, *, name: str = "Caroline") -> Person:
    from dashboard.accounts import account_user

    external_id = f"u-{uuid.uuid4().hex[:8]}"
    agent.assert_fact(assertion_data(subject=external_id, predicate="note", value=f"{name} joined",
                                     subject_name=name, valid_from="2023-05-08T13:56:00Z"))
    person = Person(agent=agent, external_id=external_id, client=Client())
    person.client.force_login(account_user(subject=person.subject))
    return person


@pytest.fixture
def person(agent) -> Person:
    return make_person(agent)


@pytest.fixture
def stranger(other_agent) -> Person:
    """Someone of another tenant."""
    return make_person(other_agent, name="Melanie")


@pytest.fixture
def neighbour(agent) -> Person:
    """Someone else of the same tenant."""
    return make_person(agent, name="Jon")




def seed_life(person: Person) -> dict:
    """A realistic memory: a move (Berlin, then Munich), a job, a plan from
    billing, a document, an inference, notes with quotes. Returns the
    webhook answers by name."""
    out = {}
    out["berlin"] = person.remember(
        predicate="city_of_residence", value="Berlin", valid_from="2025-03-01T00:00:00Z",
        stated_at="2025-03-02T09:15:00Z",
        source={"kind": "user_statement", "id": "msg-7731", "extractor": "chat-extractor@2.3",
                "evidence": "I moved to Berlin at the start of March"})
    out["munich"] = person.remember(
        predicate="city_of_residence", value="Munich", valid_from="2025-11-22T00:00:00Z",
        stated_at="2025-11-22T18:40:00Z",
        source={"kind": "user_statement", "id": "msg-8120", "extractor": "chat-extractor@2.3",
                "evidence": "We just finished the move to Munich!"})
    out["employer"] = person.remember(
        predicate="employer", value="Acme Corp", valid_from="2024-09-01T00:00:00Z",
        source={"kind": "user_document", "id": "cv-2024.pdf", "extractor": "doc-reader@1",
                "evidence": "2024 – today: Product designer, Acme Corp"})
    out["plan"] = person.remember(
        predicate="plan", value="Family", valid_from="2025-01-10T00:00:00Z",
        source={"kind": "system_record", "id": "billing:sub-5521", "extractor": "billing-sync@4",
                "evidence": "subscription sub-5521 plan=family"})
    out["language"] = person.remember(
        predicate="speaks_language", value="German", valid_from="2025-04-01T00:00:00Z",
        source={"kind": "agent_inference", "id": "inf-311", "extractor": "profile-inference@0.9",
                "evidence": "Writes most messages in German"})
    out["painting"] = person.remember(
        predicate="note", value="Paints lake sunrises; one from last year means a lot to her",
        valid_from="2023-05-08T13:56:00Z",
        source={"kind": "user_statement", "id": "locomo:conv-26:D1:14:0", "extractor": "locomo-observation",
                "evidence": "I painted that lake sunrise last year! It's special to me."})
    out["painting2"] = person.remember(
        predicate="note", value="Paints lake sunrises; one from last year means a lot to her",
        valid_from="2023-05-08T13:56:00Z",
        source={"kind": "agent_inference", "id": "inf-12", "extractor": "profile-inference@0.9",
                "evidence": "Shared a photo of a painting"})
    out["marc"] = person.remember(
        entity="Marc", predicate="employer", value="Globex", valid_from="2025-06-01T00:00:00Z",
        source={"kind": "user_statement", "id": "msg-7902", "evidence": "Marc started at Globex in June"})
    return out


def pending_question(person: Person, *, first: str = "Alte Str. 1, Berlin", second: str = "Neue Str. 2, Munich"):
    """A real pending prompt: a high-stakes tie (billing address, two
    statements from the same valid time) arrives by webhook; the conflicts
    app's task opens the prompt (called here synchronously). Returns the
    prompt."""
    from conflicts import actions as conflict_actions

    person.remember(predicate="billing_address", value=first, valid_from="2025-03-03T00:00:00Z",
                    stated_at="2025-03-03T10:00:00Z",
                    source={"kind": "user_statement", "id": f"msg-{first}", "evidence": f"My address is {first}"})
    tie = person.remember(predicate="billing_address", value=second, valid_from="2025-03-03T00:00:00Z",
                          stated_at="2025-11-22T10:00:00Z",
                          source={"kind": "user_statement", "id": f"msg-{second}", "evidence": f"Bill me at {second}"})
    assert tie["outcome"] == "conflict"
    return conflict_actions.open_conflict_prompt(conflict_id=tie["conflict_id"])
