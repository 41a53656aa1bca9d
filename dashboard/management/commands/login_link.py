"""``manage.py login_link <tenant> <subject> [<subject> ...]``: print a
one-time sign-in link to each person's dashboard (what an agent backend gets
from ``POST /api/v1/subjects/<id>/login-link``)."""
from django.core.management.base import BaseCommand, CommandError

from facts.access import LOGIN_LINK_SECONDS, mint_login_link
from facts.models import Subject


class Command(BaseCommand):
    help = "Print a one-time sign-in link (valid for a few minutes) to each subject's dashboard."

    def add_arguments(self, parser):
        parser.add_argument("tenant", help="tenant slug")
        parser.add_argument("subjects", nargs="+", help="subject external ids")
        parser.add_argument("--minutes", type=int, default=LOGIN_LINK_SECONDS // 60,
                            help=f"how long each link works (default {LOGIN_LINK_SECONDS // 60})")
        parser.add_argument("--names", action="store_true", help="print the person's name before each link")

    def handle(self, *args, **options):
        if not 1 <= options["minutes"] <= 24 * 60:
            raise CommandError("--minutes must be between 1 and 1440")
        found = {s.external_id: s for s in Subject.objects.filter(tenant__slug=options["tenant"],
                                                                  external_id__in=options["subjects"])}
        missing = [s for s in options["subjects"] if s not in found]
        if missing:
            raise CommandError(f"no such subject in tenant {options['tenant']!r}: {', '.join(missing)}")
        for external_id in options["subjects"]:
            subject = found[external_id]
            link = mint_login_link(subject=subject, actor="cli:login_link", seconds=options["minutes"] * 60)
            name = f"{subject.display_name or external_id}: " if options["names"] else ""
            self.stdout.write(f"{name}{link.url}")
