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
