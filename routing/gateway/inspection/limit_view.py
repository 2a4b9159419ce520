"""A key's or team's limits as the admin shows them: this minute's requests and tokens, slots in use, and the
budget period's spend against the budget.

Read from the limit store the gateway counts in: Redis when ``REDIS_URL`` is set (the same numbers every
replica sees), else the store of the process serving the admin page, which is only that process's share.
The admin runs in a worker thread, not on the gateway's event loop, so it asks Redis on a connection of its
own and closes it.
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass

from django.conf import settings
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from routing.clients.limit_store import LimitStore, RedisLimitStore
from routing.core.limits import NANOS_PER_USD, LimitScope, ScopeCounts, period_bounds
from routing.gateway.state import state


@dataclass(frozen=True)
class UsageView:
    counts: ScopeCounts | None
    source: str  # where the numbers come from, said on the page


async def _read(store: LimitStore, scope: LimitScope, *, close: bool) -> ScopeCounts:
    try:
        return await store.counts(scope)
    finally:
        if close:
            await store.aclose()


def scope_usage(scope: LimitScope) -> UsageView:
    """The scope's counts now, and where they were read."""
    if settings.REDIS_URL:
        store = RedisLimitStore(settings.REDIS_URL, prefix=settings.GOMODEL_LIMIT_KEY_PREFIX, socket_timeout=1.0)
        counts = asyncio.run(_read(store, scope, close=True))
        if store.shared:
            return UsageView(counts, "Redis, shared by every gateway process and replica")
        return UsageView(None, "Redis is unreachable: each gateway process counts on its own until it answers")
    counts = asyncio.run(_read(state.limits, scope, close=False))
    return UsageView(counts, f"this gateway process only (pid {os.getpid()}): without REDIS_URL every process "
                             "counts its own requests, so other processes' usage is not included")


def render_usage(scope: LimitScope) -> SafeString:
    """The admin's table of a key's or team's limits and what is used of them."""
    view = scope_usage(scope)
    counts = view.counts
    if counts is None:
        return format_html("<p>{}</p>", view.source)
    limits = scope.limits
    rows: list[tuple[str, str, str]] = []
    if limits.budget_usd is not None:
        spent = counts.spend_nanos / NANOS_PER_USD
        left = max(0.0, limits.budget_usd - spent)
        _, end = period_bounds(limits.budget_period, time.time())
        period = "total" if end is None else f"this {limits.budget_period} (UTC)"
        reserved = counts.reserved_nanos / NANOS_PER_USD
        rows.append(("budget", f"{spent:.6f} of {limits.budget_usd:g} USD spent {period}, "
                               f"{reserved:.6f} USD reserved by requests in flight",
                     f"{max(0.0, left - reserved):.6f} USD free to reserve"))
    if limits.rpm is not None:
        rows.append(("requests per minute", f"{counts.requests} of {limits.rpm} in the last 60 s",
                     f"{max(0, limits.rpm - counts.requests)} remaining"))
    if limits.tpm is not None:
        rows.append(("tokens per minute", f"{counts.tokens} of {limits.tpm} in the last 60 s, "
                                          f"{counts.reserved_tokens} reserved by requests in flight",
                     f"{max(0, limits.tpm - counts.tokens - counts.reserved_tokens)} remaining"))
    if limits.max_concurrency is not None:
        rows.append(("concurrency", f"{counts.slots} of {limits.max_concurrency} in flight",
                     f"{max(0, limits.max_concurrency - counts.slots)} free"))
    if not rows:
        return format_html("<p>{}</p>", "No limits set.")
    body = format_html_join("", "<tr><th>{}</th><td>{}</td><td>{}</td></tr>", rows)
    return format_html("<p>Counted in {}.</p><table>{}</table>", view.source, body)
