"""``manage.py create_tenant <slug> [--json]``: create a tenant or rotate
its credentials (API.md, "Command line")."""
import json

from django.core.management.base import BaseCommand

from facts.tenants import create_or_rotate_tenant


class Command(BaseCommand):
    help = "Create a tenant, or rotate its API key and webhook secret; prints the new credentials."

    def add_arguments(self, parser):
        parser.add_argument("slug")
        parser.add_argument("--name", default="")
        parser.add_argument("--json", action="store_true", help="print {slug, api_key, webhook_secret} as JSON")

    def handle(self, *args, **options):
        creds = create_or_rotate_tenant(slug=options["slug"], name=options["name"])
        if options["json"]:
            self.stdout.write(json.dumps(creds.as_json()))
        else:
            self.stdout.write(f"tenant:         {creds.slug}\napi key:        {creds.api_key}\n"
                              f"webhook secret: {creds.webhook_secret}")
