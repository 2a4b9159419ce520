"""The read-only ``auditors`` group: view permission on the audit and routing models, never on keys.

Kept in sync after every ``migrate`` (a ``post_migrate`` handler), so routing models added later are
covered. The group's permissions are *set*, not added to: anything but viewing is taken away again.
"""

from __future__ import annotations

from typing import Any

from django.db import DEFAULT_DB_ALIAS

AUDITORS_GROUP = "auditors"
# Routing models whose rows are (or lead to) credentials: auditors never see them.
HIDDEN_ROUTING_MODELS = frozenset({"gatewaykey", "providerkey"})
AUDITOR_APPS = ("audit", "routing")


def auditor_permission_codenames(available: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Of ``(app_label, codename)`` pairs, those the auditors group gets."""
    chosen = []
    for app_label, codename in available:
        if app_label not in AUDITOR_APPS or not codename.startswith("view_"):
            continue
        if app_label == "routing" and codename.removeprefix("view_") in HIDDEN_ROUTING_MODELS:
            continue
        chosen.append((app_label, codename))
    return chosen


def ensure_auditors_group(sender: Any = None, *, using: str = DEFAULT_DB_ALIAS, apps: Any = None, **_: Any) -> None:
    """Create or update the auditors group (a post_migrate handler; also callable directly)."""
    if sender is not None and getattr(sender, "label", None) not in AUDITOR_APPS:
        return
    if apps is None:
        from django.apps import apps as global_apps

        apps = global_apps
    try:
        group_model = apps.get_model("auth", "Group")
        permission_model = apps.get_model("auth", "Permission")
    except LookupError:  # auth is not migrated (yet) in this database
        return
    available = list(
        permission_model.objects.using(using)
        .filter(content_type__app_label__in=AUDITOR_APPS, codename__startswith="view_")
        .values_list("content_type__app_label", "codename", "id")
    )
    wanted = set(auditor_permission_codenames([(app, code) for app, code, _ in available]))
    ids = [pk for app, code, pk in available if (app, code) in wanted]
    group, _ = group_model.objects.using(using).get_or_create(name=AUDITORS_GROUP)
    group.permissions.set(ids)
