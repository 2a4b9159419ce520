"""A covering index for the spend page (PostgreSQL only): every column its queries read, so they are answered
from the index alone (an index-only scan) instead of the wide audit rows.

Built CONCURRENTLY, so migrating a large audit table does not hold up audit writes. Not declared in the model's
Meta: SQLite has no INCLUDE, and Django warns (models.W040) about such an index on every check there.
"""

from django.db import migrations

NAME = "audit_rev_spend_idx"
COLUMNS = (
    "key_id, key_name, team, cost_usd, billed_cost_usd, input_tokens, output_tokens, billed_input_tokens, "
    "billed_output_tokens"
)


def create(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(
            f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {NAME} ON audit_auditrevision (created_at) INCLUDE ({COLUMNS})"
        )


def drop(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {NAME}")


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("audit", "0003_revision_category"),
    ]

    operations = [
        migrations.RunPython(create, drop, atomic=False, elidable=False),
    ]
