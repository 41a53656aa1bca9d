"""``manage.py import_dyknow``: send the DyKnow timelines through the signed
webhook path (or the batch endpoint). Mapping: :mod:`facts.importers.dyknow`."""
from django.core.management.base import BaseCommand

from facts.importers import dyknow
from facts.importers.command import add_import_arguments, resolve_path, run_from_options


class Command(BaseCommand):
    help = ("Import DyKnow (offices, CEOs, sports teams from Wikidata) into a tenant through the signed webhook "
            "path or the batch endpoint; prints a progress bar on a terminal and a summary.")

    def add_arguments(self, parser):
        add_import_arguments(parser, default_path=dyknow.DEFAULT_PATH, path_help="grc_generated.json")

    def handle(self, *args, **options):
        path = resolve_path(options["path"], dyknow.DEFAULT_PATH)
        run_from_options(self, options, dataset=dyknow.DATASET,
                         build=lambda: (dyknow.build_events(path=path), dyknow.predicate_rules(path=path)))
