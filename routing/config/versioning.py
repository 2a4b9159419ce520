"""The routing configuration's version: bumped once per committed change, with a revision for auditors.

Saves and deletes of routing models mark the current transaction dirty (routing.signals). Code that knows
who is changing what (the admin, the config loader) runs inside ``config_author(...)`` and calls
``flush()`` before its transaction commits, so the version bump and the ConfigRevision commit together
with the change. Any other path (a shell, a data migration) is caught after commit by an on_commit hook.
Worker processes poll the version and reload their RoutingTable when it moves (routing.config.runtime).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator

from django.apps import apps
from django.db import transaction
from django.db.models import F

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
    from routing.models import ConfigState

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


def _bump() -> int:
    from routing.config.file import dump_config
    from routing.models import ConfigState

    ConfigState.objects.get_or_create(pk=1)
    ConfigState.objects.filter(pk=1).update(version=F("version") + 1)
    version = ConfigState.objects.get(pk=1).version
    author, source = getattr(_local, "author", None) or ("system", "other")
    snapshot = dump_config()
    if apps.is_installed("audit"):  # without the audit app the version still moves
        from audit.services import config_revision_record

        config_revision_record(version=version, author=author, source=source, snapshot=snapshot)
    log.info("routing configuration is now version %d (%s by %s)", version, source, author)
    return version
