"""The console's "Set a predicate's policy" form takes exactly the predicate
names ``PUT /api/v1/predicates/<name>`` takes, and refuses the others with
the API's words, writing nothing."""
from __future__ import annotations

from urllib.parse import quote

import pytest

from facts.models import Event, PredicatePolicy

pytestmark = pytest.mark.django_db

POLICY = {"cardinality": "one", "stakes": "low", "authority": "user"}
API_DETAIL = "must be 1-200 characters of letters, digits, _ . : -"


@pytest.mark.parametrize("name", ["billing_address", "crm.tier", "acme:plan", "shoe-size", "PlanCode", "2fa_method",
                                  "x" * 200])
def test_a_name_the_api_accepts_the_console_accepts(world, people, name):
    api = world.agent.api("PUT", f"/predicates/{quote(name)}", POLICY)

    response = people["admin"].post(f"/console/{world.slug}/policy/predicate", {"predicate": name, **POLICY})

    assert api.status_code == 200
    assert response.status_code == 200, response.content[:2000]
    assert PredicatePolicy.objects.filter(tenant=world.agent.tenant, predicate=name).count() == 2


@pytest.mark.parametrize("name", ["billing address", " employer", "plan#2", "wohnort_ändern", "x" * 201])
def test_a_name_the_api_refuses_the_console_refuses_in_the_same_words(world, people, name):
    api = world.agent.api("PUT", f"/predicates/{quote(name, safe='')}", POLICY)
    before = PredicatePolicy.objects.filter(tenant=world.agent.tenant).count(), Event.objects.filter(
        tenant=world.agent.tenant).count()

    response = people["admin"].post(f"/console/{world.slug}/policy/predicate", {"predicate": name, **POLICY})
    errors = response.context["policy_form"].errors

    assert (api.status_code, api.json()) == (400, {"detail": API_DETAIL, "field": "predicate"})
    assert response.status_code == 400
    assert errors == {"predicate": [API_DETAIL]}
    assert API_DETAIL.encode() in response.content
    assert (PredicatePolicy.objects.filter(tenant=world.agent.tenant).count(),
            Event.objects.filter(tenant=world.agent.tenant).count()) == before
