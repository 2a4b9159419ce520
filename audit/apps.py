from __future__ import annotations

from django.apps import AppConfig
from django.db.models.signals import post_migrate


class AuditConfig(AppConfig):
    name = "audit"
    verbose_name = "Audit"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from audit.auditors import ensure_auditors_group

        # After every migrate (no sender filter: the routing app's permissions must exist first, and they
        # are created by the auth app's own post_migrate handler for the routing app).
        post_migrate.connect(ensure_auditors_group, dispatch_uid="audit.ensure_auditors_group")
