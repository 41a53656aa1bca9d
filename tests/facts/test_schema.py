"""The ledger's indexes: no index may be a leading prefix of another plain
index on the same table, since every index is one more page dirtied on each
insert (issue 6, write amplification)."""
from __future__ import annotations

import pytest
from django.db import connection

pytestmark = pytest.mark.django_db

HOT_TABLES = ("facts_assertion", "facts_event", "facts_currentfact", "facts_factkey", "facts_subject",
              "facts_conflict", "facts_webhookreceipt")


def table_indexes(table: str) -> list[dict]:
    """Every index of ``table`` (constraint-backed ones too), from ``pg_index``."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT c.relname, i.indisprimary, i.indisunique, i.indpred IS NOT NULL,
                   ARRAY(SELECT a.attname FROM unnest(i.indkey) WITH ORDINALITY AS k(attnum, n)
                         JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum ORDER BY k.n)
            FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
            WHERE i.indrelid = %s::regclass
            """, [table])
        return [{"name": n, "primary": p, "unique": u, "partial": part, "columns": list(cols)}
                for n, p, u, part, cols in cursor.fetchall()]


@pytest.mark.parametrize("table", HOT_TABLES)
def test_no_index_is_a_prefix_of_another(table):
    indexes = table_indexes(table)
    covering = [i for i in indexes if not i["partial"]]
    for index in indexes:
        if index["primary"] or index["unique"] or index["partial"]:
            continue
        cols = index["columns"]
        for other in covering:
            if other["name"] != index["name"] and other["columns"][:len(cols)] == cols:
                pytest.fail(f"{table}: {index['name']} {cols} duplicates the lead of {other['name']} {other['columns']}")


def test_foreign_keys_filtered_alone_keep_an_index():
    """Erasure and subject-only reads filter on ``subject_id`` alone, the
    history and the write path on ``fact_key_id`` alone."""
    def leads(table: str) -> set[str]:
        return {i["columns"][0] for i in table_indexes(table) if not i["partial"]}

    for table in ("facts_assertion", "facts_event", "facts_currentfact", "facts_factkey", "facts_conflict"):
        assert "subject_id" in leads(table), table
    for table in ("facts_assertion", "facts_event", "facts_currentfact", "facts_conflict"):
        assert "fact_key_id" in leads(table), table
    for table in HOT_TABLES:
        assert "tenant_id" in leads(table), table


def foreign_keys(table: str) -> set[str]:
    """The columns of ``table`` that carry a foreign-key constraint."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT a.attname FROM pg_constraint c
            JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = ANY(c.conkey)
            WHERE c.contype = 'f' AND c.conrelid = %s::regclass
            """, [table])
        return {name for (name,) in cursor.fetchall()}


def test_bulk_rows_reach_tenant_and_subject_through_their_fact_key():
    """The rows the ledger writes in bulk check their fact key, which checks
    its subject, which checks its tenant, but not their own tenant and
    subject columns: each check is a lookup per row at commit and a
    key-share lock on the tenant row every writer shares (facts/models.py,
    ``UNCHECKED``). Rows without a fact key keep their subject's check."""
    assert foreign_keys("facts_assertion") == {"fact_key_id"}
    assert foreign_keys("facts_currentfact") == {"fact_key_id"}
    assert foreign_keys("facts_event") == {"fact_key_id", "subject_id"}
    assert foreign_keys("facts_webhookreceipt") == set()
    assert foreign_keys("facts_factkey") == {"subject_id"}
    assert foreign_keys("facts_subject") == {"tenant_id"}


def test_erasing_a_tenant_still_removes_its_bulk_rows(agent):
    """Deletion cascades in Django, constraint or not."""
    from facts.models import Assertion, CurrentFact, Event, WebhookReceipt
    from tests.factories import assertion_data

    agent.assert_fact(assertion_data(value="Berlin"))
    tenant = agent.tenant
    models = (Assertion, CurrentFact, Event, WebhookReceipt)
    assert all(m.objects.filter(tenant=tenant).exists() for m in models)
    tenant.delete()
    assert not any(m.objects.filter(tenant_id=tenant.id).exists() for m in models)
