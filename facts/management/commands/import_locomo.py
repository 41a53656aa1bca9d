"""``manage.py import_locomo``: send LoCoMo's per-speaker observations as
``note`` memories through the signed webhook path (or the batch endpoint).
Mapping, and the time zone assumed (UTC): :mod:`facts.importers.locomo`."""
from django.core.management.base import BaseCommand

from facts.importers import locomo
from facts.importers.command import add_import_arguments, resolve_path, run_from_options


class Command(BaseCommand):
    help = ("Import LoCoMo (ten long conversations; each speaker a subject, each observation a note with the "
            "cited turn as evidence) through the signed webhook path or the batch endpoint.")

    def add_arguments(self, parser):
        add_import_arguments(parser, default_path=locomo.DEFAULT_PATH, path_help="locomo10.json")
        parser.add_argument("--conversations", default="",
                            help="comma-separated sample ids to import (e.g. conv-26,conv-30); default: all ten")

    def handle(self, *args, **options):
        path = resolve_path(options["path"], locomo.DEFAULT_PATH)
        chosen = {c.strip() for c in options["conversations"].split(",") if c.strip()} or None
        run_from_options(self, options, dataset=locomo.DATASET,
                         build=lambda: (locomo.build_events(path=path, conversations=chosen), locomo.predicate_rules()))
