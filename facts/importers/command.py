"""The options and run loop shared by the ``import_*`` management commands
(API.md, "Command line": a progress bar on a terminal, a summary at the end).
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Callable

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError

from facts.importers.common import DataError, ImportEvent, PredicateRule, order_events, run_import
from facts.importers.sender import MODES, SendError, make_sender, tenant_credentials
from facts.maintenance import analyze_ledger


def add_import_arguments(parser: argparse.ArgumentParser, *, default_path: Path, path_help: str) -> None:
    """Add ``--path --tenant --api-key --secret --mode --url --shuffle
    --seed --limit --batch-size --json --no-analyze`` to ``parser``."""
    parser.add_argument("--path", type=Path, default=None,
                        help=f"{path_help} (default: {default_path.as_posix()}, relative to the project root)")
    parser.add_argument("--tenant", default="demo", help="tenant slug (default: demo)")
    parser.add_argument("--api-key", default=None,
                        help="the tenant's API key; with --secret, use these instead of creating/rotating credentials")
    parser.add_argument("--secret", default=None, help="the tenant's webhook secret (whsec_...)")
    parser.add_argument("--mode", choices=MODES, default="webhook",
                        help="webhook: one signed POST /webhooks/<slug>/ per event; batch: POST /api/v1/assertions/batch")
    parser.add_argument("--url", default=None,
                        help="post over HTTP to this server (e.g. http://127.0.0.1:8000); default: in-process")
    parser.add_argument("--shuffle", action="store_true", help="send in a shuffled order instead of date order")
    parser.add_argument("--seed", type=int, default=0, help="seed of --shuffle (default 0)")
    parser.add_argument("--limit", type=int, default=None, help="send only the first N events of the order")
    parser.add_argument("--batch-size", type=int, default=500, help="events per batch request (1-1000, default 500)")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    add_analyze_argument(parser)


def add_analyze_argument(parser: argparse.ArgumentParser) -> None:
    """Add ``--no-analyze``: by default a command that bulk-writes the ledger
    ends with ``ANALYZE`` of its tables (:func:`facts.maintenance.analyze_ledger`)."""
    parser.add_argument("--no-analyze", action="store_true",
                        help="do not ANALYZE the ledger tables at the end (done by default: a server may run "
                             "without autovacuum, and the planner needs the new table sizes)")


def analyze_after(command: BaseCommand, options: dict) -> None:
    """``ANALYZE`` the ledger tables unless ``--no-analyze``. A failure is
    reported on stderr, not raised: the data is written either way (with
    ``--url`` the server may even use another database than this process)."""
    if options.get("no_analyze"):
        return
    try:
        tables = analyze_ledger()
    except DatabaseError as exc:
        command.stderr.write(f"ANALYZE of the ledger tables failed: {exc}")
    else:
        if options.get("verbosity", 1) > 1:
            command.stderr.write(f"analyzed {', '.join(tables)}")


def resolve_path(raw: Path | None, default: Path) -> Path:
    """``raw`` as given (relative to the working directory), or ``default``
    relative to the project root."""
    return raw if raw is not None else Path(settings.BASE_DIR) / default


def run_from_options(command: BaseCommand, options: dict, *, dataset: str,
                     build: Callable[[], tuple[list[ImportEvent], dict[str, PredicateRule]]]) -> None:
    """Build the events, order them, send them, ``ANALYZE`` the ledger
    tables (unless ``--no-analyze``), print the summary. Raises
    :class:`CommandError` for unreadable data, unusable credentials, a
    transport failure, or when any event was refused (after the summary)."""
    if options["limit"] is not None and options["limit"] < 0:
        raise CommandError("--limit must be zero or more")
    if not 1 <= options["batch_size"] <= 1000:
        raise CommandError("--batch-size must be between 1 and 1000")
    try:
        events, rules = build()
    except (OSError, DataError) as exc:
        raise CommandError(f"cannot read {dataset}: {exc}") from exc
    ordered = order_events(events, shuffle=options["shuffle"], seed=options["seed"], limit=options["limit"])
    try:
        credentials = tenant_credentials(slug=options["tenant"], api_key=options["api_key"],
                                         webhook_secret=options["secret"])
        sender = make_sender(credentials=credentials, mode=options["mode"], url=options["url"])
    except ValueError as exc:
        raise CommandError(str(exc)) from exc
    try:
        summary = run_import(sender=sender, dataset=dataset, events=ordered, predicates=rules,
                             batch_size=options["batch_size"])
    except SendError as exc:
        analyze_after(command, options)
        raise CommandError(str(exc)) from exc
    analyze_after(command, options)
    command.stdout.write(json.dumps(summary.as_json()) if options["json"] else summary.as_text())
    if summary.refused:
        raise CommandError(f"{summary.refused} of {summary.sent} events were refused")
