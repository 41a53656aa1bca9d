"""``manage.py import_yago``: send YAGO11k's forward facts through the signed
webhook path (or the batch endpoint). Mapping: :mod:`facts.importers.yago`."""
from django.core.management.base import BaseCommand, CommandError

from facts.importers import yago
from facts.importers.command import add_import_arguments, resolve_path, run_from_options


class Command(BaseCommand):
    help = ("Import YAGO11k (inverse relations dropped, year precision, multi-valued relations as 'many') into a "
            "tenant through the signed webhook path or the batch endpoint; prints a progress bar and a summary.")

    def add_arguments(self, parser):
        add_import_arguments(parser, default_path=yago.DEFAULT_DIR,
                             path_help="directory holding entity2id.txt, relation2id.txt and the split files")
        parser.add_argument("--splits", default=",".join(yago.SPLITS),
                            help="comma-separated split files to import, each one source (default: train,valid,test)")

    def handle(self, *args, **options):
        directory = resolve_path(options["path"], yago.DEFAULT_DIR)
        splits = tuple(s.strip() for s in options["splits"].split(",") if s.strip())
        unknown = sorted(set(splits) - set(yago.SPLITS))
        if unknown or not splits:
            raise CommandError(f"--splits takes some of {', '.join(yago.SPLITS)}")
        run_from_options(self, options, dataset=yago.DATASET,
                         build=lambda: (yago.build_events(directory=directory, splits=splits), yago.predicate_rules()))
