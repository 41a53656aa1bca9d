"""Each projection row keeps its API fact item as JSON text (issue 6).

Facts-now sends the items of a subject's rows. Built at read time, the
JSON (five timestamps formatted per row, nested objects) cost 0.4 to 0.5 ms
per request in PostgreSQL, against 0.05 ms for finding the rows; now each
row's item is built once, when the row is written, and facts-now joins the
stored texts.

The column is kept by a trigger, not by Django: every writer of the
projection (the ledger's ``COPY`` and ``INSERT``s, rebuilds, the
benchmark's preload, any ``UPDATE``) gets the same item without knowing
about it, and the model does not declare the column, so no write sends it.
The expression is what ``facts.queries.fact_item_from_row`` builds in
Python (``tests/facts/test_reads.py`` holds them equal); a change to one is
a new migration for the other. Items of ``proposed`` rows are built too,
and never read.
"""
from django.db import migrations


def _iso(column: str) -> str:
    """RFC 3339 UTC with ``Z``, microseconds only when nonzero (``iso``)."""
    return f"""replace(to_char({column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'), '.000000Z', 'Z')"""


def _item(r: str) -> str:
    """The fact item of the projection row ``r`` (a JSON value)."""
    base = (f"'entity', {r}.entity, 'predicate', {r}.predicate, 'scope', CASE WHEN {r}.scope_kind = 'global' "
            f"THEN {r}.scope_kind ELSE {r}.scope_kind || ':' || {r}.scope_key END, 'status', {r}.status, "
            f"'valid_from', {_iso(f'{r}.valid_from')}, 'valid_to', {_iso(f'{r}.valid_to')}")
    return (
        f"CASE WHEN {r}.status = 'conflict' THEN json_build_object({base}, 'candidates', {r}.candidates, "
        f"'conflict_id', {r}.conflict_id::text, 'rule', {r}.rule) "
        f"ELSE json_build_object({base}, 'value', {r}.value, 'assertion_id', {r}.assertion_id::text, "
        f"'asserted_valid_to', {_iso(f'{r}.asserted_valid_to')}, 'stated_at', {_iso(f'{r}.stated_at')}, "
        f"'recorded_at', {_iso(f'{r}.recorded_at')}, 'source', json_build_object('kind', {r}.source->'kind', "
        f"'id', {r}.source->'id', 'extractor', {r}.source->'extractor', 'evidence', {r}.source->'evidence'), "
        f"'sources', {r}.sources, 'rule', {r}.rule) END"
    )


FORWARD = f"""
ALTER TABLE facts_currentfact ADD COLUMN item text NOT NULL DEFAULT '';

CREATE FUNCTION facts_currentfact_item() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.item := ({_item("NEW")})::text;
    RETURN NEW;
END
$$;

CREATE TRIGGER facts_currentfact_item BEFORE INSERT OR UPDATE ON facts_currentfact
    FOR EACH ROW EXECUTE FUNCTION facts_currentfact_item();

UPDATE facts_currentfact SET item = '';
"""

BACKWARD = """
DROP TRIGGER facts_currentfact_item ON facts_currentfact;
DROP FUNCTION facts_currentfact_item();
ALTER TABLE facts_currentfact DROP COLUMN item;
"""


class Migration(migrations.Migration):

    dependencies = [
        ("facts", "0004_unchecked_tenant_subject_links"),
    ]

    operations = [migrations.RunSQL(FORWARD, BACKWARD)]
