"""Factories for the console tests: staff accounts, end users, a tenant's
world of things every console URL can point at."""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import timedelta

import factory
import time_machine
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from conflicts import actions as conflict_actions
from conflicts.models import Delivery, OutboxMessage, ReviewTask
from console.models import StaffMembership
from tests.conflicts.factories import EndpointFactory
from tests.conftest import TenantClient
from tests.factories import assertion_data


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"staff-{n}")
    password = factory.django.Password("correct horse battery")


class MembershipFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = StaffMembership

    user = factory.SubFactory(UserFactory)
    role = StaffMembership.AGENT


def client_for(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def csrf_client_for(user) -> Client:
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    return client


def proposal_task(agent: TenantClient, *, subject: str, old: str = "card ending 1111", new: str = "card ending 2222") -> ReviewTask:
    """A high-stakes change nobody confirmed in time: a real review task
    (payment method changed by a user statement, the prompt escalated)."""
    agent.assert_fact(assertion_data(subject=subject, predicate="payment_method", value=old,
                                     valid_from="2025-03-01T00:00:00Z", source_id=f"{subject}-pm-old",
                                     source={"kind": "user_statement", "id": f"{subject}-pm-old",
                                             "evidence": f"Please charge my {old}"}))
    proposed = agent.assert_fact(assertion_data(subject=subject, predicate="payment_method", value=new,
                                                valid_from="2025-06-01T00:00:00Z",
                                                source={"kind": "user_statement", "id": f"{subject}-pm-new",
                                                        "extractor": "chat-extractor@2.3",
                                                        "evidence": f"Use my {new} from now on"}))
    assert proposed["outcome"] == "proposed"
    prompt = conflict_actions.open_proposal_prompt(tenant_id=agent.tenant.id, assertion_id=proposed["assertion_id"])
    with time_machine.travel(prompt.escalate_at + timedelta(seconds=1)):
        conflict_actions.escalate_prompts()
    return ReviewTask.objects.get(tenant=agent.tenant, prompt=prompt)


def failed_delivery(tenant) -> Delivery:
    endpoint = EndpointFactory(tenant=tenant)
    now = timezone.now()
    message = OutboxMessage.objects.create(id=f"msg_{uuid.uuid4().hex}", tenant=tenant, type="fact.superseded",
                                           payload={"type": "fact.superseded", "data": {}}, created_at=now)
    return Delivery.objects.create(tenant=tenant, message=message, endpoint=endpoint, status=Delivery.FAILED,
                                   attempts=12, created_at=now, next_attempt_at=now, last_status_code=500)


@dataclass
class World:
    """One tenant with something behind every console URL."""

    agent: TenantClient
    subject: str
    task: ReviewTask
    delivery: Delivery
    batch: uuid.UUID
    key_id: int

    @property
    def slug(self) -> str:
        return self.agent.slug
