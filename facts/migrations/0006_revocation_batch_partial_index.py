"""The (tenant, revocation batch) index becomes partial.

Only a console revocation sets ``revocation_batch``, and the one query on it
(``facts.ledger.unretract``) asks for one batch, so rows with none need no
entry: every assertion a write adds skips this index.
"""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('facts', '0005_currentfact_item'),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name='assertion',
            name='facts_asser_tenant__dcab43_idx',
        ),
        migrations.AddIndex(
            model_name='assertion',
            index=models.Index(condition=models.Q(('revocation_batch__isnull', False)), fields=['tenant', 'revocation_batch'], name='assertion_revocation_batch'),
        ),
    ]
