"""ANALYZE after bulk writes (facts/maintenance.py): the import commands and
rebuild_projection refresh the ledger's planner statistics when they end,
since a server may run without autovacuum."""
from __future__ import annotations

import io
import json
from pathlib import Path
from unittest import mock

import pytest
from django.conf import settings
from django.core.management import call_command
from django.db import connection

from facts.importers import command as import_command
from facts.maintenance import LEDGER_MODELS, analyze_ledger
from facts.models import Assertion
from tests.factories import assertion_data

pytestmark = pytest.mark.django_db

DYKNOW = Path(settings.BASE_DIR) / ".." / "shared" / "data" / "dyknow" / "grc_generated.json"


def reltuples(table: str) -> float:
    with connection.cursor() as cursor:
        cursor.execute("SELECT reltuples FROM pg_class WHERE oid = %s::regclass", [table])
        return cursor.fetchone()[0]


def column_stats(table: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stats WHERE schemaname = 'public' AND tablename = %s", [table])
        return cursor.fetchone()[0]


def test_analyze_ledger_refreshes_every_ledger_table(agent):
    for i in range(5):
        agent.assert_fact(assertion_data(value=f"city {i}", valid_from=f"202{i}-01-01T00:00:00Z"))

    tables = analyze_ledger()

    assert tables == [m._meta.db_table for m in LEDGER_MODELS]
    assert reltuples("facts_assertion") >= Assertion.objects.count() >= 5
    assert column_stats("facts_assertion") > 0 and column_stats("facts_event") > 0


@pytest.fixture
def analyze_spy():
    with mock.patch.object(import_command, "analyze_ledger", wraps=analyze_ledger) as spy:
        yield spy


def test_an_import_command_ends_with_analyze(agent, analyze_spy):
    out = io.StringIO()
    call_command("import_dyknow", "--path", str(DYKNOW), "--tenant", agent.slug, "--api-key", agent.api_key,
                 "--secret", agent.webhook_secret, "--limit", "3", "--json", stdout=out)

    assert json.loads(out.getvalue())["sent"] == 3
    assert analyze_spy.call_count == 1
    assert reltuples("facts_assertion") >= 3


def test_no_analyze_skips_it(agent, analyze_spy):
    call_command("import_dyknow", "--path", str(DYKNOW), "--tenant", agent.slug, "--api-key", agent.api_key,
                 "--secret", agent.webhook_secret, "--limit", "1", "--no-analyze", stdout=io.StringIO())

    assert analyze_spy.call_count == 0


def test_rebuild_projection_ends_with_analyze(agent, analyze_spy):
    agent.assert_fact(assertion_data(value="Berlin", valid_from="2026-03-01T00:00:00Z"))
    out = io.StringIO()

    call_command("rebuild_projection", "--tenant", agent.slug, stdout=out, stderr=io.StringIO())

    assert out.getvalue().startswith("rebuilt 1 keys")
    assert analyze_spy.call_count == 1


def test_a_failed_analyze_is_reported_and_does_not_fail_the_command(agent):
    err = io.StringIO()
    with mock.patch.object(import_command, "analyze_ledger", side_effect=import_command.DatabaseError("no server")):
        call_command("rebuild_projection", "--tenant", agent.slug, stdout=io.StringIO(), stderr=err)

    assert "ANALYZE of the ledger tables failed: no server" in err.getvalue()
