"""``manage.py reconcile [--tenant SLUG] [--repair]``: compare every fact
key's projection with the log by per-key hashes (DESIGN.md, "The read
model"); report the keys that drift and, with ``--repair``, rebuild them.

Exit status 1 when drift was found and not repaired. A progress bar on a
terminal (stderr), a summary line at the end (stdout).
"""
import sys

from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from facts.models import Tenant
from facts.reconcile import count_keys, reconcile


class Command(BaseCommand):
    help = ("Recompute every fact key from the log and compare per-key hashes with the current-view projection; "
            "report drifting keys, rebuild them with --repair. Exits 1 when drift is left unrepaired.")

    def add_arguments(self, parser):
        parser.add_argument("--tenant", default=None, help="only this tenant (slug); default: every tenant")
        parser.add_argument("--repair", action="store_true", help="rebuild the drifting keys from the log")

    def handle(self, *args, **options):
        tenant = None
        if options["tenant"]:
            tenant = Tenant.objects.filter(slug=options["tenant"]).first()
            if tenant is None:
                raise CommandError(f"no tenant {options['tenant']!r}")
        with tqdm(total=count_keys(tenant=tenant), unit="key", desc="reconcile", file=sys.stderr,
                  disable=not sys.stderr.isatty(), dynamic_ncols=True) as bar:
            report = reconcile(tenant=tenant, repair=options["repair"], progress=bar.update)
        for drift in report.drifting:
            self.stdout.write(f"drift: {drift.describe()}")
        self.stdout.write(report.summary())
        if report.unrepaired:
            raise CommandError(f"{report.unrepaired} keys drift from the log; run with --repair to rebuild them",
                               returncode=1)
