"""``manage.py rebuild_projection [--tenant SLUG]``: recompute the current
view of every fact key from the log (DESIGN.md, "The read model"), one short
transaction per key, then ``ANALYZE`` of the ledger tables (unless
``--no-analyze``). A progress bar on a terminal (stderr), a summary line at
the end (stdout)."""
import sys
import time

from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from facts.importers.command import add_analyze_argument, analyze_after
from facts.ledger import rebuild_projection
from facts.models import FactKey, Tenant

CHUNK = 200


class Command(BaseCommand):
    help = "Rebuild the current-view projection of every fact key (or one tenant's) from the log."

    def add_arguments(self, parser):
        parser.add_argument("--tenant", default=None, help="only this tenant (slug); default: every tenant")
        add_analyze_argument(parser)

    def handle(self, *args, **options):
        keys = FactKey.objects.order_by("pk")
        if options["tenant"]:
            tenant = Tenant.objects.filter(slug=options["tenant"]).first()
            if tenant is None:
                raise CommandError(f"no tenant {options['tenant']!r}")
            keys = keys.filter(tenant=tenant)
        key_ids = list(keys.values_list("pk", flat=True))
        started = time.monotonic()
        rebuilt = 0
        with tqdm(total=len(key_ids), unit="key", desc="rebuild", file=sys.stderr,
                  disable=not sys.stderr.isatty(), dynamic_ncols=True) as bar:
            for i in range(0, len(key_ids), CHUNK):
                done = rebuild_projection(key_ids=key_ids[i:i + CHUNK])
                rebuilt += done
                bar.update(done)
        analyze_after(self, options)
        self.stdout.write(f"rebuilt {rebuilt} keys in {time.monotonic() - started:.1f}s")
