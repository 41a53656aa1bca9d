"""``manage.py create_staff``: a console account for a tenant."""
import pytest
from django.contrib.auth import authenticate
from django.core.management import CommandError, call_command

from console.models import StaffMembership

pytestmark = pytest.mark.django_db


def test_create_staff_makes_an_admin_who_can_sign_in(agent):
    call_command("create_staff", agent.slug, "ops", "--role", "admin", "--password", "s3cret-pass")

    user = authenticate(username="ops", password="s3cret-pass")

    assert (user.staff_membership.tenant.slug, user.staff_membership.role) == (agent.slug, StaffMembership.ADMIN)


def test_create_staff_refuses_an_unknown_tenant(db):
    with pytest.raises(CommandError):
        call_command("create_staff", "nope", "ops", "--password", "x")
    assert StaffMembership.objects.count() == 0
