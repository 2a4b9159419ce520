"""Purging the response cache (docs/cache.md): the admin's action and ``manage.py purge_cache``.

A purge is a configuration change: it bumps each cache's generation, which is in every key of its answers, and
records a new version, so every process stops serving the kept answers within a poll. The generations are part
of each revision (routing.config.file.caches.purge_generations).
"""

from __future__ import annotations

from collections.abc import Collection

from django.db import transaction
from django.db.models import F

from routing import models as m
from routing.config import versioning


def purge_caches(names: Collection[str] | None, *, author: str, source: str) -> list[str]:
    """Make every kept answer of ``names`` (None: every cache) unreachable: bump their generation, which is in every
    key, as one configuration change every process follows within a poll. The names purged; ValueError naming a
    name that has no cache."""
    rows = m.ResponseCache.objects.all() if names is None else m.ResponseCache.objects.filter(model__in=list(names))
    purged = sorted(rows.values_list("model", flat=True))
    missing = sorted(set(names or ()) - set(purged))
    if missing:
        raise ValueError(f"no cache is configured for {', '.join(repr(n) for n in missing)}")
    with transaction.atomic(), versioning.config_author(author, source=source):
        m.ResponseCache.objects.filter(model__in=purged).update(generation=F("generation") + 1)
        versioning.mark_dirty()  # an update() sends no post_save
        versioning.flush()
    return purged
