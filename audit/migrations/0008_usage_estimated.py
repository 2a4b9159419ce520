from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("audit", "0007_revision_limit_and_exploration"),
    ]

    operations = [
        migrations.AddField(
            model_name="auditrevision",
            name="usage_estimated",
            field=models.BooleanField(
                default=False,
                help_text="Some usage is the gateway's estimate: the provider's never arrived (a client that hung "
                          "up, a stream cut short), or the provider reports none.",
            ),
        ),
        migrations.AddField(
            model_name="attemptrecord",
            name="usage_estimated",
            field=models.BooleanField(
                default=False, help_text="This attempt's usage is the gateway's estimate, not the provider's.",
            ),
        ),
    ]
