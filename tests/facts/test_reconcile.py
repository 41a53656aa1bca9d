"""Reconciliation and rebuild of the current-view projection (DESIGN.md,
"The read model": per-key hashes, not counts)."""
from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from facts.models import CurrentFact
from facts.reconcile import reconcile
from tests.factories import assertion_data


@pytest.fixture
def memory(agent):
    """A subject with a version history, a many-valued key and a proposal."""
    agent.assert_fact(assertion_data(predicate="employer", value="Acme", valid_from="2020-01-01T00:00:00Z"))
    agent.assert_fact(assertion_data(predicate="employer", value="Globex", valid_from="2023-01-01T00:00:00Z"))
    agent.assert_fact(assertion_data(predicate="speaks_language", value="German"))
    agent.assert_fact(assertion_data(predicate="billing_address", value="1 Main St", valid_from="2024-01-01T00:00:00Z"))
    agent.assert_fact(assertion_data(predicate="billing_address", value="2 High St", valid_from="2025-01-01T00:00:00Z"))
    return agent


def run(command: str, *args) -> str:
    out = StringIO()
    call_command(command, *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def employer_now(agent) -> str:
    (fact,) = agent.get("/subjects/u-1/facts", predicate="employer")["facts"]
    return fact["value"]


def test_a_projection_written_by_the_ledger_reconciles(memory):
    report = reconcile(tenant=memory.tenant)

    assert (report.keys_checked, report.drifting, report.repaired) == (3, [], 0)


def test_reconcile_detects_a_value_altered_behind_the_ledgers_back(memory):
    # Same row count, same value_key: only the content differs.
    CurrentFact.objects.filter(tenant=memory.tenant, predicate="employer", value="Globex").update(value="Hacked")

    report = reconcile(tenant=memory.tenant)

    assert [(d.predicate, d.subject) for d in report.drifting] == [("employer", "u-1")]
    assert report.drifting[0].stored_digest != report.drifting[0].expected_digest
    assert employer_now(memory) == "Hacked"


@pytest.mark.parametrize("tamper", [
    lambda qs: qs.filter(predicate="employer", value="Acme").update(valid_to=None),
    lambda qs: qs.filter(predicate="employer", value="Acme").delete(),
    lambda qs: qs.filter(predicate="billing_address", status="proposed").update(status="value"),
    lambda qs: qs.filter(predicate="speaks_language").update(sources=[]),
])
def test_reconcile_detects_any_altered_row(memory, tamper):
    tamper(CurrentFact.objects.filter(tenant=memory.tenant))

    assert len(reconcile(tenant=memory.tenant).drifting) == 1


def test_repair_rebuilds_the_drifting_key(memory):
    CurrentFact.objects.filter(tenant=memory.tenant, predicate="employer", value="Globex").update(value="Hacked")

    report = reconcile(tenant=memory.tenant, repair=True)

    assert (len(report.drifting), report.repaired) == (1, 1)
    assert employer_now(memory) == "Globex"
    assert reconcile(tenant=memory.tenant).drifting == []


def test_reconcile_for_one_tenant_leaves_the_others_alone(memory, other_agent):
    other_agent.assert_fact(assertion_data(predicate="employer", value="Initech"))
    CurrentFact.objects.filter(tenant=other_agent.tenant).update(value="Hacked")

    assert reconcile(tenant=memory.tenant).drifting == []
    assert len(reconcile(tenant=other_agent.tenant).drifting) == 1


def test_reconcile_command_reports_drift_and_exits_non_zero(memory):
    CurrentFact.objects.filter(tenant=memory.tenant, predicate="employer", value="Globex").update(value="Hacked")
    out = StringIO()

    with pytest.raises(CommandError) as refused:
        call_command("reconcile", "--tenant", memory.slug, stdout=out, stderr=StringIO())

    assert refused.value.returncode == 1
    lines = out.getvalue().splitlines()
    assert lines[0].startswith(f"drift: {memory.slug}/u-1 self.employer[global]")
    assert lines[-1] == "checked 3 keys: 1 drifting, 0 repaired"
    assert employer_now(memory) == "Hacked"


def test_reconcile_command_repairs(memory):
    CurrentFact.objects.filter(tenant=memory.tenant, predicate="employer", value="Globex").update(value="Hacked")

    out = run("reconcile", "--tenant", memory.slug, "--repair")

    assert out.splitlines()[-1] == "checked 3 keys: 1 drifting, 1 repaired"
    assert employer_now(memory) == "Globex"
    assert run("reconcile", "--tenant", memory.slug).splitlines() == ["checked 3 keys: 0 drifting, 0 repaired"]


def test_reconcile_command_refuses_an_unknown_tenant(db):
    with pytest.raises(CommandError):
        run("reconcile", "--tenant", "nobody")


def test_rebuild_projection_command_restores_a_lost_projection(memory):
    before = memory.get("/subjects/u-1/facts")["facts"]
    CurrentFact.objects.filter(tenant=memory.tenant).delete()

    out = run("rebuild_projection", "--tenant", memory.slug)

    assert out.startswith("rebuilt 3 keys in ")
    assert memory.get("/subjects/u-1/facts")["facts"] == before
    assert reconcile(tenant=memory.tenant).drifting == []
