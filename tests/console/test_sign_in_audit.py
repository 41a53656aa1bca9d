"""A refused console sign-in is in the audit log (console/audit.py)."""
from __future__ import annotations

import pytest
from django.test import Client

from console.audit import entries
from console.models import AuditEntry
from tests.console.factories import MembershipFactory

pytestmark = pytest.mark.django_db


def test_a_refused_sign_in_is_audited_under_the_accounts_tenant_without_the_password(agent):
    staff = MembershipFactory(tenant=agent.tenant)
    before = AuditEntry.objects.count()

    response = Client().post("/console/login/", {"username": staff.user.username, "password": "wrong guess"},
                             REMOTE_ADDR="203.0.113.7")

    (entry,) = entries(tenant=agent.tenant, action="login")
    assert response.status_code == 200  # the form again, nobody signed in
    assert AuditEntry.objects.count() == before + 1
    assert (entry.actor, entry.role, entry.method, entry.ip, entry.detail) == (
        staff.user.username, "anonymous", "POST", "203.0.113.7", {"outcome": "refused"})
    assert "wrong guess" not in str(entry.__dict__)


def test_a_refused_sign_in_under_an_unknown_name_has_no_tenant(agent):
    Client().post("/console/login/", {"username": "nobody-here", "password": "x"})

    entry = AuditEntry.objects.get(actor="nobody-here")
    assert (entry.tenant_id, entry.role) == (None, "anonymous")


def test_a_sign_in_that_succeeds_is_not_recorded_as_refused(agent):
    staff = MembershipFactory(tenant=agent.tenant)

    response = Client().post("/console/login/", {"username": staff.user.username,
                                                 "password": "correct horse battery"})

    assert response.status_code == 302
    assert not AuditEntry.objects.filter(detail__outcome="refused").exists()
