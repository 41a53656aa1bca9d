"""``manage.py create_staff <tenant> <username> --role admin|agent --password ...``:
create (or update) a console account for a tenant's staff."""
from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from console.models import StaffMembership
from facts.models import Tenant


class Command(BaseCommand):
    help = "Create or update a support-console account (support agent or tenant admin) for a tenant."

    def add_arguments(self, parser):
        parser.add_argument("tenant")
        parser.add_argument("username")
        parser.add_argument("--role", choices=[StaffMembership.ADMIN, StaffMembership.AGENT], default=StaffMembership.AGENT)
        parser.add_argument("--password", required=True)

    def handle(self, *args, tenant: str, username: str, role: str, password: str, **options):
        found = Tenant.objects.filter(slug=tenant).first()
        if found is None:
            raise CommandError(f"no tenant '{tenant}'")
        with transaction.atomic():
            user, _ = get_user_model().objects.get_or_create(username=username)
            if hasattr(user, "subject_account"):
                raise CommandError(f"'{username}' is an end-user account")
            user.set_password(password)
            user.save()
            StaffMembership.objects.update_or_create(user=user, defaults={"tenant": found, "role": role})
        self.stdout.write(f"{username} is {role} of {tenant}")
