"""Drop indexes that duplicate another index's leading column(s).

Every index is one more page dirtied per insert. Dropped:

- ``tenant_id`` on assertion, event, conflict, current fact, fact key,
  subject and webhook receipt: each table has a composite (index or unique
  constraint) that leads with ``tenant_id``;
- ``fact_key_id`` on assertion and event: ``(fact_key_id, recorded_at)`` and
  ``(fact_key_id, at)`` lead with it;
- the ``Meta`` index ``(fact_key_id)`` on current fact, identical to the
  foreign key's own index (which stays).

``subject_id`` indexes stay: composites lead with ``tenant_id`` and erasure,
subject-only reads and a deleted subject's cascades filter on ``subject_id``
alone.

Django's ``AlterField(db_index=False)`` on a foreign key drops and re-adds
the foreign-key constraint, which re-validates it by scanning the whole
table. Only the index has to go, so the database side is a plain
``DROP INDEX`` and the model state is altered separately.
"""
import django.db.models.deletion
from django.db import migrations, models

# (table, column, index name Django gave it in 0001_initial)
DROPPED = [
    ("facts_assertion", "fact_key_id", "facts_assertion_fact_key_id_59fe99ba"),
    ("facts_assertion", "tenant_id", "facts_assertion_tenant_id_dc8e4f14"),
    ("facts_conflict", "tenant_id", "facts_conflict_tenant_id_e37996b3"),
    ("facts_currentfact", "tenant_id", "facts_currentfact_tenant_id_d3f586a8"),
    ("facts_event", "fact_key_id", "facts_event_fact_key_id_5823228e"),
    ("facts_event", "tenant_id", "facts_event_tenant_id_6212cc0d"),
    ("facts_factkey", "tenant_id", "facts_factkey_tenant_id_e88f1455"),
    ("facts_subject", "tenant_id", "facts_subject_tenant_id_b57f449e"),
    ("facts_webhookreceipt", "tenant_id", "facts_webhookreceipt_tenant_id_2dab08a9"),
]


def unindexed_fk(to: str, **kwargs) -> models.ForeignKey:
    return models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, to=to, **kwargs)


class Migration(migrations.Migration):

    dependencies = [
        ('facts', '0001_initial'),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name='currentfact',
            name='facts_curre_fact_ke_b8d210_idx',
        ),
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunSQL(
                    sql=f'DROP INDEX IF EXISTS "{name}"',
                    reverse_sql=f'CREATE INDEX IF NOT EXISTS "{name}" ON "{table}" ("{column}")',
                )
                for table, column, name in DROPPED
            ],
            state_operations=[
                migrations.AlterField(model_name='assertion', name='fact_key',
                                      field=unindexed_fk('facts.factkey', related_name='assertions')),
                migrations.AlterField(model_name='assertion', name='tenant', field=unindexed_fk('facts.tenant')),
                migrations.AlterField(model_name='conflict', name='tenant', field=unindexed_fk('facts.tenant')),
                migrations.AlterField(model_name='currentfact', name='tenant', field=unindexed_fk('facts.tenant')),
                migrations.AlterField(model_name='event', name='fact_key',
                                      field=unindexed_fk('facts.factkey', null=True)),
                migrations.AlterField(model_name='event', name='tenant', field=unindexed_fk('facts.tenant')),
                migrations.AlterField(model_name='factkey', name='tenant', field=unindexed_fk('facts.tenant')),
                migrations.AlterField(model_name='subject', name='tenant',
                                      field=unindexed_fk('facts.tenant', related_name='subjects')),
                migrations.AlterField(model_name='webhookreceipt', name='tenant', field=unindexed_fk('facts.tenant')),
            ],
        ),
    ]
