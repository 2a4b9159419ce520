"""Reads for the auditor pages and exports: filtered history with keyset pagination, one request, one session.

History is ordered by ``(created_at, id)`` descending and paged with a cursor (the last row's pair), never
with OFFSET or COUNT(*): each page is one index range scan, however deep, on the composite index of the
filter in use (see ``audit.models.FILTERED_FIELDS`` and ``SPARSE_FILTERED_FIELDS``).
"""

from __future__ import annotations

import base64
import datetime as dt
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from django.db.models import Count, Q, QuerySet, Sum, Value
from django.db.models.functions import Coalesce

from audit.configdiff import scrub_snapshot
from audit.models import AttemptRecord, AuditRevision, ConfigRevision

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
DEFAULT_PAGE_SIZE = 50
# The value of the key and team filters that selects requests without one (no name can be just a dash).
NO_VALUE = "-"
MAX_PAGE_SIZE = 500


@dataclass(frozen=True)
class HistoryFilters:
    """The history filters; every field None means "any"."""

    since: dt.datetime | None = None
    until: dt.datetime | None = None
    key: str | None = None
    team: str | None = None
    session: str | None = None
    model: str | None = None
    tier: str | None = None
    target: str | None = None
    status: str | None = None
    error_class: str | None = None
    config_version: int | None = None
    category: str | None = None
    policy: str | None = None
    limit: str | None = None  # the limit that refused the request: "key:rpm", "team:budget"

    def as_query(self) -> dict[str, str]:
        """The filters as URL query parameters (for links to other pages and exports)."""
        out: dict[str, str] = {}
        for name, value in self.__dict__.items():
            if value is None or value == "":
                continue
            out[name] = value.isoformat() if isinstance(value, dt.datetime) else str(value)
        return out


def filtered_revisions(filters: HistoryFilters) -> QuerySet[AuditRevision]:
    """Revisions matching ``filters``, newest first."""
    qs = AuditRevision.objects.all()
    if filters.since is not None:
        qs = qs.filter(created_at__gte=filters.since)
    if filters.until is not None:
        qs = qs.filter(created_at__lt=filters.until)
    if filters.key:
        qs = key_filter(qs, filters.key)
    if filters.team:
        qs = qs.filter(team="" if filters.team == NO_VALUE else filters.team)
    if filters.session:
        qs = qs.filter(session_hash=filters.session)
    if filters.model:
        qs = qs.filter(requested_model=filters.model)
    if filters.tier:
        qs = qs.filter(tier="" if filters.tier == "none" else filters.tier)
    if filters.target:
        qs = qs.filter(target=filters.target)
    if filters.status:
        qs = _status_filter(qs, filters.status)
    if filters.error_class:
        qs = qs.filter(error_class="" if filters.error_class == "none" else filters.error_class)
    if filters.config_version is not None:
        qs = qs.filter(config_version=filters.config_version)
    if filters.category:
        qs = qs.filter(category=filters.category)
    if filters.policy:
        qs = qs.filter(policy=filters.policy)
    if filters.limit:
        qs = qs.filter(limit_refused=filters.limit)
    return qs.order_by("-created_at", "-id")


def key_filter(qs: QuerySet[AuditRevision], key: str) -> QuerySet[AuditRevision]:
    """A key by id (digits), by name, or ``-`` for requests made without a key."""
    if key == NO_VALUE:
        return qs.filter(key_id__isnull=True, key_name="")
    return qs.filter(key_id=int(key)) if key.isdigit() else qs.filter(key_name=key)


def _status_filter(qs: QuerySet[AuditRevision], status: str) -> QuerySet[AuditRevision]:
    """``200`` exact, ``5xx`` a class, ``error`` anything not 2xx (including no status)."""
    if status.isdigit():
        return qs.filter(status=int(status))
    if len(status) == 3 and status[0] in "12345" and status[1:].lower() == "xx":
        low = int(status[0]) * 100
        return qs.filter(status__gte=low, status__lt=low + 100)
    if status == "error":
        return qs.filter(Q(status__isnull=True) | Q(status__lt=200) | Q(status__gte=300))
    return qs.none()


# -- keyset cursors -------------------------------------------------------------------------------------


def encode_cursor(created_at: dt.datetime, pk: int) -> str:
    micros = (created_at - EPOCH) // dt.timedelta(microseconds=1)
    return base64.urlsafe_b64encode(f"{micros}:{pk}".encode()).decode().rstrip("=")


def decode_cursor(token: str) -> tuple[dt.datetime, int] | None:
    """The (created_at, id) pair in a cursor, or None for a malformed one."""
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
        micros, pk = raw.split(":")
        return EPOCH + dt.timedelta(microseconds=int(micros)), int(pk)
    except (ValueError, UnicodeDecodeError, OverflowError):
        return None


def after_cursor(qs: QuerySet[AuditRevision], cursor: tuple[dt.datetime, int]) -> QuerySet[AuditRevision]:
    """Rows strictly after ``cursor`` in (created_at, id) descending order.

    Written as ``created_at <= c`` (an index range) minus the few rows at exactly ``c`` with a higher id,
    which PostgreSQL plans as one backward index scan.
    """
    created_at, pk = cursor
    return qs.filter(created_at__lte=created_at).exclude(created_at=created_at, id__gte=pk)


@dataclass(frozen=True)
class Page:
    rows: list[AuditRevision]
    next_cursor: str | None


def history_page(filters: HistoryFilters, *, cursor: str | None, size: int = DEFAULT_PAGE_SIZE) -> Page:
    """One page of history: up to ``size`` rows after ``cursor`` and the cursor of the next page."""
    size = max(1, min(size, MAX_PAGE_SIZE))
    qs = filtered_revisions(filters).defer(
        "prompt_text", "output_text", "candidates", "skipped", "rejected", "nested_selections", "error_message",
        "policy_detail",
    )
    position = decode_cursor(cursor) if cursor else None
    if position is not None:
        qs = after_cursor(qs, position)
    rows = list(qs[: size + 1])
    more = len(rows) > size
    rows = rows[:size]
    return Page(rows=rows, next_cursor=encode_cursor(rows[-1].created_at, rows[-1].id) if more else None)


def iter_revisions(
    filters: HistoryFilters, *, chunk: int = 1000, with_attempts: bool = False
) -> Iterator[AuditRevision]:
    """Every revision matching ``filters``, newest first, read in keyset chunks (bounded memory)."""
    position: tuple[dt.datetime, int] | None = None
    while True:
        qs = filtered_revisions(filters)
        if position is not None:
            qs = after_cursor(qs, position)
        if with_attempts:
            qs = qs.prefetch_related("attempts")
        rows = list(qs[:chunk])
        yield from rows
        if len(rows) < chunk:
            return
        position = (rows[-1].created_at, rows[-1].id)


# -- one request, one session ---------------------------------------------------------------------------


def revision_detail(request_id: str) -> tuple[AuditRevision, list[AttemptRecord], ConfigRevision | None] | None:
    """The revision with its attempts in order and the config revision it was decided under."""
    revision = AuditRevision.objects.filter(request_id=request_id).first()
    if revision is None:
        return None
    attempts = list(revision.attempts.order_by("seq"))
    config = None
    if revision.config_version is not None:
        config = ConfigRevision.objects.filter(version=revision.config_version).defer("snapshot").first()
    return revision, attempts, config


@dataclass(frozen=True)
class PinChange:
    at: dt.datetime
    request_id: str
    before: str
    after: str
    score: float | None
    signals: list[dict[str, Any]]
    why: str


def session_revisions(session_hash: str, *, limit: int = 1000) -> list[AuditRevision]:
    """The session's requests in the order they arrived (the first ``limit``)."""
    return list(
        AuditRevision.objects.filter(session_hash=session_hash)
        .defer("prompt_text", "output_text", "candidates", "skipped", "rejected", "nested_selections")
        .order_by("created_at", "id")[:limit]
    )


def pin_history(revisions: list[AuditRevision]) -> list[PinChange]:
    """When the session's tier pin moved, and why: the escalations, in order.

    The pin is escalate-only, so it changes when a request escalated it (``tier_escalated``) or when the
    first tier-routed request of the session set it. A request handed down to easy because the hard tier could
    not serve it (``tier_escalation`` capability without ``tier_escalated``) left the pin at hard.
    """
    changes: list[PinChange] = []
    pinned = ""
    for revision in revisions:
        if not revision.tier:
            continue
        before = revision.pin_before or pinned
        held = _held_tier(revision)
        if revision.tier_escalated or (not pinned and not revision.tier_forced):
            why = _pin_reason(revision, before)
            changes.append(
                PinChange(
                    at=revision.created_at,
                    request_id=revision.request_id,
                    before=before or "none",
                    after=held,
                    score=revision.score,
                    signals=list(revision.signals or []),
                    why=why,
                )
            )
        if not revision.tier_forced:
            pinned = held if revision.tier_escalated or not pinned else pinned
    return changes


def _held_tier(revision: AuditRevision) -> str:
    """The tier the session's pin holds after ``revision``: its tier, unless it was handed down for capability."""
    if revision.tier_escalation == "capability" and not revision.tier_escalated and revision.tier == "easy":
        return "hard"
    return revision.tier


def _pin_reason(revision: AuditRevision, before: str) -> str:
    if revision.reasoning_shortcut:
        return "the request asked for reasoning"
    if revision.tier_escalation == "capability" and revision.tier_escalated:
        lacking = next((s.get("detail") for s in revision.signals or [] if s.get("name") == "capability"), "")
        return f"escalated from {before or 'none'}: the easy tier cannot serve the request" + (
            f" ({lacking})" if lacking else "")
    top = sorted(revision.signals or [], key=lambda s: -float(s.get("points") or 0))[:3]
    named = ", ".join(f"{s.get('name')} (+{s.get('points')})" for s in top if s.get("name"))
    score = "?" if revision.score is None else f"{revision.score:g}"
    if revision.tier_escalated:
        return f"escalated from {before or 'none'}: score {score}" + (f" from {named}" if named else "")
    return f"first tier decision: score {score}" + (f" from {named}" if named else "")


def config_revisions(*, before_version: int | None, limit: int = 20) -> list[ConfigRevision]:
    """Config revisions, newest first, with versions below ``before_version`` (keyset on version)."""
    qs = ConfigRevision.objects.defer("snapshot").order_by("-version")
    if before_version is not None:
        qs = qs.filter(version__lt=before_version)
    return list(qs[:limit])


def threshold_in_force(*, version: int | None = None, at: dt.datetime | None = None) -> int | None:
    """The smart-routing threshold recorded in a config revision: the given version's, else the one in
    force at ``at`` (the latest when None). None when no revision records an admin-set threshold."""
    qs = ConfigRevision.objects.order_by("-version")
    revision = qs.filter(version=version).only("snapshot").first() if version is not None else None
    if revision is None:
        if at is not None:
            qs = qs.filter(created_at__lte=at)
        revision = qs.only("snapshot").first()
    if revision is None:
        return None
    settings_entry = revision.snapshot.get("settings") if isinstance(revision.snapshot, Mapping) else None
    value = settings_entry.get("smart_routing_threshold") if isinstance(settings_entry, Mapping) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def billed_since(*, since: dt.datetime, key_id: int | None = None, team: str | None = None) -> float:
    """What the providers billed for a key's (or a team's) requests since ``since``, in USD: the budget's spend
    as the audit trail recorded it. A range scan of the key's (or team's) composite index."""
    if (key_id is None) == (team is None):
        raise ValueError("billed_since takes a key_id or a team")
    qs = AuditRevision.objects.filter(created_at__gte=since)
    qs = qs.filter(key_id=key_id) if key_id is not None else qs.filter(team=team)
    total = qs.aggregate(total=Sum(Coalesce("billed_cost_usd", "cost_usd", Value(0.0))))["total"]
    return float(total or 0.0)


def config_content_recorded(*, version: int, snapshot: Mapping[str, Any]) -> bool:
    """Whether ``version``'s revision records exactly ``snapshot`` (as it would be stored: scrubbed, as JSON).

    The versioning asks this under its lock before a bump: the same content written again (the same file applied
    by another process) is no new version. A version with no revision (the audit app added later) never matches.
    """
    recorded = ConfigRevision.objects.filter(version=version).values_list("snapshot", flat=True).first()
    if recorded is None:
        return False
    stored = json.loads(json.dumps(scrub_snapshot(dict(snapshot)), default=str))
    return bool(stored == recorded)


@dataclass(frozen=True)
class CacheStats:
    """A cached name's requests since some time: by the cache's outcome, and the provider spend its hits saved."""

    hits: int = 0  # exact and semantic
    semantic_hits: int = 0
    misses: int = 0
    bypasses: int = 0
    saved_usd: float = 0.0

    @property
    def hit_rate(self) -> float | None:
        """Hits among the lookups (bypasses looked nothing up); None before the first lookup."""
        looked_up = self.hits + self.misses
        return None if looked_up == 0 else self.hits / looked_up


def cache_stats(*, name: str, since: dt.datetime) -> CacheStats:
    """``name``'s cache outcomes in the revisions since ``since`` (one grouped query on the requested-model index)."""
    rows = (AuditRevision.objects.filter(requested_model=name, created_at__gte=since).exclude(cache_outcome="")
            .values("cache_outcome").annotate(n=Count("id"), saved=Sum("cache_saved_usd")))
    counts = {row["cache_outcome"]: (row["n"], row["saved"] or 0.0) for row in rows}
    exact, semantic = counts.get("hit", (0, 0.0)), counts.get("semantic-hit", (0, 0.0))
    return CacheStats(hits=exact[0] + semantic[0], semantic_hits=semantic[0], misses=counts.get("miss", (0, 0.0))[0],
                      bypasses=counts.get("bypass", (0, 0.0))[0], saved_usd=float(exact[1] + semantic[1]))
