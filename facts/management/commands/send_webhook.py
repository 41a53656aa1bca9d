"""``manage.py send_webhook <tenant> <json>``: sign one event with the
tenant's webhook secret (Standard Webhooks) and post it to
``/webhooks/<tenant>/``: what ``curl`` cannot do by itself.

The JSON is a whole envelope ``{"type", "timestamp", "data"}``, or just the
``data`` object (then wrapped as ``--type``, default ``fact.asserted``).
Give it inline, as ``@file.json``, or ``-`` for standard input.
"""
import json
import os
import sys
import uuid
from datetime import datetime, timezone

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from facts.importers.sender import SendError, make_sender
from facts.tenants import TenantCredentials


class Command(BaseCommand):
    help = ("Sign one inbound event with the tenant's webhook secret and post it to /webhooks/<tenant>/; "
            "prints the HTTP status and the response.")

    def add_arguments(self, parser):
        parser.add_argument("tenant", help="tenant slug")
        parser.add_argument("event", help="JSON envelope or data object, inline, @file.json, or - for stdin")
        parser.add_argument("--secret", default=os.environ.get("MEMORYUI_WEBHOOK_SECRET"),
                            help="the tenant's webhook secret, whsec_... (default: $MEMORYUI_WEBHOOK_SECRET)")
        parser.add_argument("--type", default="fact.asserted", help="event type when EVENT is only the data object")
        parser.add_argument("--id", default=None, help="webhook-id (default: a new msg_<uuid>; reuse one to replay)")
        parser.add_argument("--url", default=settings.MEMORYUI_PUBLIC_URL,
                            help="server to post to (default: %(default)s)")
        parser.add_argument("--in-process", action="store_true", help="post in-process instead of over HTTP")

    def handle(self, *args, **options):
        if not options["secret"]:
            raise CommandError("pass --secret whsec_... or set MEMORYUI_WEBHOOK_SECRET")
        envelope = _load(options["event"])
        if not (isinstance(envelope, dict) and "type" in envelope and "data" in envelope):
            envelope = {"type": options["type"], "timestamp": datetime.now(timezone.utc).isoformat().replace("+00:00", "Z"),
                        "data": envelope}
        sender = make_sender(credentials=TenantCredentials(options["tenant"], "", options["secret"]),
                             url=None if options["in_process"] else options["url"])
        try:
            status, body = sender.send_webhook(envelope, webhook_id=options["id"] or f"msg_{uuid.uuid4().hex}")
        except (SendError, ValueError) as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(f"HTTP {status}\n{json.dumps(body, indent=2)}")
        if status != 200:
            raise CommandError(f"the server answered {status}")


def _load(raw: str):
    try:
        if raw == "-":
            return json.load(sys.stdin)
        if raw.startswith("@"):
            with open(raw[1:], encoding="utf-8") as fh:
                return json.load(fh)
        return json.loads(raw)
    except OSError as exc:
        raise CommandError(f"cannot read {raw[1:]}: {exc}") from exc
    except json.JSONDecodeError as exc:
        raise CommandError(f"the event is not valid JSON: {exc}") from exc
