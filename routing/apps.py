from __future__ import annotations

from django.apps import AppConfig


class RoutingConfig(AppConfig):
    name = "routing"
    verbose_name = "Routing"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from routing import (
            catalogue_check,  # noqa: F401  (registers the stale-prices database check)
            signals,  # noqa: F401  (config changes bump the version)
        )
