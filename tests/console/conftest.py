"""Fixtures for the console: a tenant's world, its staff in both roles,
another tenant's admin, an end user, an anonymous visitor."""
from __future__ import annotations

import pytest
from django.test import Client

from console import services
from console.models import StaffMembership
from facts.models import ApiKey
from tests.conftest import make_tenant_client
from tests.console.factories import (
    MembershipFactory, UserFactory, World, client_for, failed_delivery, proposal_task,
)
from tests.dashboard.conftest import make_person
from tests.factories import assertion_data


@pytest.fixture
def world(agent) -> World:
    person = make_person(agent)
    agent.assert_fact(assertion_data(subject=person.external_id, predicate="employer", value="Acme Corp",
                                     source={"kind": "user_statement", "id": "bad-1", "extractor": "faulty@1"}))
    task = proposal_task(agent, subject=person.external_id)
    batch = services.revoke(tenant=agent.tenant, selection=services.Selection(extractor="faulty@1"),
                            reason="test", actor="staff:setup")
    return World(agent=agent, subject=person.external_id, task=task, delivery=failed_delivery(agent.tenant),
                 batch=batch.id, key_id=ApiKey.objects.filter(tenant=agent.tenant).first().id)


@pytest.fixture
def people(world):
    """A signed-in client per role, by name."""
    other = make_tenant_client()
    person = make_person(world.agent, name="Jon")
    return {
        "agent": client_for(MembershipFactory(tenant=world.agent.tenant, role=StaffMembership.AGENT).user),
        "admin": client_for(MembershipFactory(tenant=world.agent.tenant, role=StaffMembership.ADMIN).user),
        "other_admin": client_for(MembershipFactory(tenant=other.tenant, role=StaffMembership.ADMIN).user),
        "end_user": person.client,
        "anonymous": Client(),
        "superuser": client_for(UserFactory(is_superuser=True, is_staff=True)),
    }
