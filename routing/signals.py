"""Every save or delete of a routing configuration model marks the transaction for a version bump."""

from __future__ import annotations

from typing import Any

from django.db.models.signals import post_delete, post_save

from routing import models as m
from routing.config import versioning

CONFIG_MODELS = (
    m.Provider,
    m.ProviderKey,
    m.ProviderModel,
    m.VirtualModel,
    m.VirtualModelTarget,
    m.TierRoute,
    m.CategoryRoute,
    m.RoutingPolicy,
    m.Contract,
    m.Team,
    m.GatewayKey,
    m.RoutingSettings,
    m.ResponseCache,
)


def _changed(sender: Any, **kwargs: Any) -> None:
    if kwargs.get("raw"):
        return  # fixtures loading
    versioning.mark_dirty()


for _model in CONFIG_MODELS:
    post_save.connect(_changed, sender=_model, dispatch_uid=f"config-changed-save-{_model.__name__}")
    post_delete.connect(_changed, sender=_model, dispatch_uid=f"config-changed-delete-{_model.__name__}")
