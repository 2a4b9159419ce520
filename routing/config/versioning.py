"""The routing configuration's version: bumped once per committed change, with a revision for auditors.

Saves and deletes of routing models mark the current transaction dirty (routing.signals). Code that knows
who is changing what (the admin, the config loader) runs inside ``config_author(...)`` and calls
``flush()`` before its transaction commits, so the version bump and the ConfigRevision commit together
with the change. Any other path (a shell, a data migration) is caught after commit by an on_commit hook.
Worker processes poll the version and reload their RoutingTable when it moves (routing.config.runtime).

A bump holds the ConfigState row locked (SELECT ... FOR UPDATE) and compares the configuration with the latest
revision's: a change whose content is already recorded (several worker processes applying the same file at
start-up, each after the other has committed) moves nothing, so one content is one version. The revision's
content is the config file's form plus the gateway keys (never their secrets), so a key created or revoked is
a change in the history like any other.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator
from typing import Any

from django.apps import apps
from django.db import transaction
from django.db.models import F

from routing.config.file.caches import purge_generations
from routing.config.file.dump import dump_config
from routing.models import ConfigState, GatewayKey

log = logging.getLogger("gomodel.config")
_local = threading.local()


@contextlib.contextmanager
def config_author(author: str, *, source: str) -> Iterator[None]:
    previous = getattr(_local, "author", None)
    _local.author = (author, source)
    try:
        yield
    finally:
        _local.author = previous


def mark_dirty() -> None:
    """Note that routing configuration changed in the current transaction.

    Every mark registers its own on_commit hook (the first to run does the work, the rest find nothing to
    do): a flag alone would be left set by a rolled-back transaction and swallow the next change.
    """
    _local.dirty = True
    transaction.on_commit(_after_commit)


def discard_pending() -> None:
    _local.dirty = False


def current_version() -> int:
    row = ConfigState.objects.filter(pk=1).first()
    return row.version if row else 0


def flush() -> int:
    """Bump the version and record a revision now, inside the caller's transaction; the new version."""
    if not getattr(_local, "dirty", False):
        return current_version()
    _local.dirty = False
    return _bump()


def _after_commit() -> None:
    if getattr(_local, "dirty", False):
        _local.dirty = False
        with transaction.atomic():
            _bump()


def revision_snapshot() -> dict[str, Any]:
    """What a configuration revision records: the config file's canonical form and the gateway keys.

    Keys are not part of the file (their secrets exist only as hashes), but creating, limiting or revoking one
    changes what the gateway serves, so the history shows it: each key by name with its team, models, limits,
    expiry and revocation. Neither the secret's hash nor its prefix is recorded.
    """
    snapshot = dump_config()
    keys = gateway_key_entries()
    if keys:
        snapshot[KEYS_SECTION] = keys
    purges = purge_generations()
    if purges:  # a purge changes no file entry, yet every process must follow it (docs/cache.md)
        snapshot[CACHE_PURGES_SECTION] = purges
    return snapshot


# Not "keys" or "gateway_keys": the audit scrubs every field whose name ends so (it may hold a credential).
KEYS_SECTION = "gateway_access"
CACHE_PURGES_SECTION = "cache_purges"


def gateway_key_entries() -> list[dict[str, Any]]:
    entries = []
    for key in GatewayKey.objects.select_related("team").order_by("id"):
        entry: dict[str, Any] = {"name": key.name}
        if key.team is not None:
            entry["team"] = key.team.name
        if key.allowed_models:
            entry["models"] = list(key.allowed_models)
        for field in ("rpm", "tpm", "max_concurrency"):
            if getattr(key, field) is not None:
                entry[field] = getattr(key, field)
        if key.budget_usd is not None:
            entry["budget_usd"] = float(key.budget_usd)
            entry["budget_period"] = key.budget_period
        if key.expires_at is not None:
            entry["expires_at"] = key.expires_at.isoformat()
        if key.revoked:
            entry["revoked"] = True
        entries.append(entry)
    return entries


def _bump() -> int:
    # The row exists from here on whoever creates it; the lock orders every process's bump after the one before
    # has committed (SQLite takes no row locks: its writers are serialised by the database lock instead).
    ConfigState.objects.bulk_create([ConfigState(pk=1, version=0)], ignore_conflicts=True)
    state = ConfigState.objects.select_for_update().get(pk=1)
    snapshot = revision_snapshot()
    author, source = getattr(_local, "author", None) or ("system", "other")
    audited = apps.is_installed("audit")  # without the audit app there is nothing to compare: the version moves
    if audited and state.version > 0:
        from audit.selectors import config_content_recorded

        if config_content_recorded(version=state.version, snapshot=snapshot):
            log.info("routing configuration unchanged at version %d (%s by %s wrote the same content)",
                     state.version, source, author)
            return int(state.version)
    ConfigState.objects.filter(pk=1).update(version=F("version") + 1)
    version = int(ConfigState.objects.get(pk=1).version)
    if audited:
        from audit.services import config_revision_record

        config_revision_record(version=version, author=author, source=source, snapshot=snapshot)
    log.info("routing configuration is now version %d (%s by %s)", version, source, author)
    return version
