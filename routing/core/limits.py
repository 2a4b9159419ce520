"""Per-key and per-team limits: what they are, the budget periods, and what an answer says about them.

Pure: every function takes the time as a parameter. The counting itself (sliding logs, slots, reservations,
spend) is in ``routing.core.limit_ledger``; the stores in ``routing.clients.limit_store`` keep the counts in
this process or in Redis and both decide with ``decide`` below (the Redis script mirrors it line for line).

Semantics (docs/governance.md):

- ``rpm N``: a sliding log of admission times; a request is admitted while fewer than N were admitted in
  the last 60 seconds, so N requests arriving at once are all admitted and no 60-second window ever holds
  more than N.
- ``tpm N``: the tokens each answer really used, counted in one-second buckets when the answer ends, plus
  what the requests in flight have reserved; a request is admitted only when the last 60 seconds' tokens,
  the reservations in flight and its own reservation fit in N.
- ``max_concurrency N``: a slot held from admission until the answer ends (every path releases it).
- ``budget_usd X`` per ``day``, ``week`` (from Monday), ``month`` (UTC) or ``total``: the spend of the
  current period plus the reservations in flight plus this request's reservation must fit in X.

A request's reservation is what it may cost at most (``Reservation``, worked out in ``routing.core.reserve``):
its input estimate plus its ``max_tokens`` times ``n``, and that at the dearest price it can be served at.
Settlement replaces the reservation with the real usage. So the counted tokens of a window (or the spend of
a period) exceed the limit only by what answers used beyond their own reservations, whatever the number of
requests in flight.
"""

from __future__ import annotations

import calendar
import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import NamedTuple

WINDOW_S = 60.0
BUDGET_PERIODS = ("day", "week", "month", "total")
LIMIT_NAMES = ("rpm", "tpm", "concurrency", "budget")
ERROR_CODES = {
    "rpm": "rate_limit_exceeded",
    "tpm": "rate_limit_exceeded",
    "concurrency": "concurrency_limit_exceeded",
    "budget": "budget_exceeded",
}
NANOS_PER_USD = 1_000_000_000  # spend is counted in integer nano-dollars: exact sums, no float drift
TOTAL_BUDGET_RETRY_S = 3600  # a total budget never resets; the client is told to come back in an hour


@dataclass(frozen=True, slots=True)
class Limits:
    """One key's or team's limits; None means unlimited on that dimension."""

    rpm: int | None = None
    tpm: int | None = None
    max_concurrency: int | None = None
    budget_usd: float | None = None
    budget_period: str = "month"

    def __post_init__(self) -> None:
        for name in ("rpm", "tpm", "max_concurrency"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ValueError(f"{name} must be a whole number of at least 1, got {value!r}")
        if self.budget_usd is not None and not (self.budget_usd >= 0 and math.isfinite(self.budget_usd)):
            raise ValueError(f"budget_usd must be 0 or more, got {self.budget_usd!r}")
        if self.budget_period not in BUDGET_PERIODS:
            raise ValueError(f"budget_period must be one of {', '.join(BUDGET_PERIODS)}, got {self.budget_period!r}")

    @property
    def active(self) -> bool:
        return any(v is not None for v in (self.rpm, self.tpm, self.max_concurrency, self.budget_usd))

    @property
    def budget_nanos(self) -> int | None:
        return None if self.budget_usd is None else round(self.budget_usd * NANOS_PER_USD)


@dataclass(frozen=True, slots=True)
class LimitScope:
    """Whose limits: a key (``ident`` ``key:<id>``) or a team (``team:<name>``); counted under ``ident``."""

    kind: str  # "key" or "team"
    name: str
    ident: str
    limits: Limits
    team: str = ""  # the team's name: a team's own, or the key's team (empty for a key without one)


class Reservation(NamedTuple):
    """What one request may cost at most, held from its admission until its settlement."""

    tokens: int = 0
    nanos: int = 0


NO_RESERVATION = Reservation()


class ScopeCounts(NamedTuple):
    """What a store counted for one scope at ``now``, before this request is added.

    Times are seconds on the store's clock (``now`` is on the same clock). ``tokens_retry_s`` is when the
    token window has room for this request's reservation again (only computed when it has not). ``reserved_*``
    are the reservations of the requests in flight. A named tuple rather than a frozen dataclass: one is built
    per scope and request, in a third of the time.
    """

    requests: int = 0
    oldest_request_s: float | None = None
    tokens: int = 0
    oldest_tokens_s: float | None = None
    tokens_retry_s: float | None = None
    slots: int = 0
    spend_nanos: int = 0
    reserved_tokens: int = 0
    reserved_nanos: int = 0


@dataclass(frozen=True, slots=True)
class Refusal:
    scope: LimitScope
    limit: str  # one of LIMIT_NAMES
    retry_after_s: float
    # For tpm and budget: why. "used" (the window or period is used up), "in_flight" (the reservations of
    # requests in flight leave no room for this one's), "too_large" (this request alone reserves more than the
    # limit, so waiting cannot help); with what it reserved.
    detail: str = "used"
    reserved: int = 0

    @property
    def code(self) -> str:
        return ERROR_CODES[self.limit]

    def message(self) -> str:
        who = f'{self.scope.kind} "{self.scope.name}"'
        limits = self.scope.limits
        if self.limit == "rpm":
            return f"Rate limit reached for {who}: {limits.rpm} requests per minute. Retry after the Retry-After delay."
        if self.limit == "tpm":
            if self.detail == "too_large":
                return (f"Request too large for {who}: it may use up to {self.reserved} tokens (its input estimate "
                        f"plus max_tokens times n), more than the limit of {limits.tpm} tokens per minute. "
                        "Lower max_tokens (or n), or shorten the input.")
            if self.detail == "in_flight":
                return (f"Rate limit reached for {who}: {limits.tpm} tokens per minute, with the tokens reserved by "
                        f"requests in flight; this request may use up to {self.reserved}. Retry after the "
                        "Retry-After delay, or lower max_tokens.")
            return f"Rate limit reached for {who}: {limits.tpm} tokens per minute. Retry after the Retry-After delay."
        if self.limit == "concurrency":
            return (f"Concurrency limit reached for {who}: {limits.max_concurrency} requests in flight at once. "
                    "Retry when one of them has finished.")
        period = "in total" if limits.budget_period == "total" else f"per {limits.budget_period}"
        if self.detail in ("too_large", "in_flight"):
            may_cost = f"{self.reserved / NANOS_PER_USD:.6f}".rstrip("0").rstrip(".")
            beside = " beside the requests in flight" if self.detail == "in_flight" else ""
            return (f"Budget exceeded for {who}: {limits.budget_usd:g} USD {period}; this request may cost up to "
                    f"{may_cost} USD (its input estimate plus max_tokens at the dearest price it can be served at), "
                    f"more than is left{beside}. Lower max_tokens, or raise the budget.")
        end = ("; it does not reset" if limits.budget_period == "total"
               else f"; it resets at the start of the next {limits.budget_period} (UTC)")
        return f"Budget exceeded for {who}: {limits.budget_usd:g} USD {period}{end}."


def decide(scopes: tuple[LimitScope, ...], counts: tuple[ScopeCounts, ...], now: float,
           period_end: tuple[float | None, ...], reservation: Reservation = NO_RESERVATION) -> Refusal | None:
    """The limit this request breaks for longest, or None when it breaks none.

    ``period_end[i]`` is when scope i's budget period ends (None for ``total``). A request whose reservation
    fits the limit but not beside the reservations in flight is told to retry in a second (one of them settles
    soon, usually for less than it reserved). Of every limit that refuses, the one with the longest wait is
    reported (its code and message explain the Retry-After, and a client that waits it is not refused again by
    another one); on a tie the key comes before its team, and budget, rpm, tpm, concurrency in that order.
    """
    refusals: list[Refusal] = []
    for scope, count, end in zip(scopes, counts, period_end, strict=True):
        limits = scope.limits
        budget = limits.budget_nanos
        if budget is not None:
            refusal = _over_budget(scope, count, budget, reservation.nanos, now, end)
            if refusal is not None:
                refusals.append(refusal)
        if limits.rpm is not None and count.requests >= limits.rpm:
            oldest = count.oldest_request_s
            refusals.append(Refusal(scope, "rpm", WINDOW_S if oldest is None else oldest + WINDOW_S - now))
        tpm = limits.tpm
        if tpm is not None:
            refusal = _over_tpm(scope, count, tpm, reservation.tokens, now)
            if refusal is not None:
                refusals.append(refusal)
        if limits.max_concurrency is not None and count.slots >= limits.max_concurrency:
            refusals.append(Refusal(scope, "concurrency", 1.0))
    if not refusals:
        return None
    longest = refusals[0]
    for refusal in refusals[1:]:
        if refusal.retry_after_s > longest.retry_after_s:
            longest = refusal
    return longest


def _over_budget(scope: LimitScope, count: ScopeCounts, budget: int, own: int, now: float,
                 end: float | None) -> Refusal | None:
    spend = count.spend_nanos
    until_reset = TOTAL_BUDGET_RETRY_S if end is None else max(end - now, 1.0)
    if spend >= budget:
        return Refusal(scope, "budget", until_reset)
    if spend + own > budget:  # waiting for this period cannot help
        return Refusal(scope, "budget", until_reset, "too_large", own)
    if spend + count.reserved_nanos + own > budget:
        return Refusal(scope, "budget", 1.0, "in_flight", own)
    return None


def _over_tpm(scope: LimitScope, count: ScopeCounts, tpm: int, own: int, now: float) -> Refusal | None:
    if own > tpm:
        return Refusal(scope, "tpm", WINDOW_S, "too_large", own)
    retry = count.tokens_retry_s
    wait = WINDOW_S if retry is None else max(retry - now, 0.001)
    if count.tokens >= tpm:
        return Refusal(scope, "tpm", wait)
    if count.tokens + own > tpm:
        return Refusal(scope, "tpm", wait, "in_flight" if count.reserved_tokens else "used", own)
    if count.tokens + count.reserved_tokens + own > tpm:
        return Refusal(scope, "tpm", 1.0, "in_flight", own)
    return None


def retry_after_header(seconds: float) -> str:
    """Retry-After in whole seconds, at least 1 (a client that retries at once would be refused again)."""
    return str(max(1, math.ceil(seconds - 1e-9)))


# -- budget periods (UTC) -------------------------------------------------------------------------------------

_PERIODS: dict[str, tuple[float, float, str]] = {}  # the last period seen of each kind: start, end, id


def _period(period: str, now_unix: float) -> tuple[float, float, str]:
    """(start, end, id) of the calendar period holding ``now_unix``; the last one of each kind is remembered,
    since the calendar arithmetic would otherwise be most of a limit check's CPU."""
    known = _PERIODS.get(period)
    if known is not None and known[0] <= now_unix < known[1]:
        return known
    start, end = _calendar_bounds(period, now_unix)
    moment = datetime.fromtimestamp(start, tz=UTC)
    ident = f"{period}:{moment:%Y-%m}" if period == "month" else f"{period}:{moment:%Y-%m-%d}"
    _PERIODS[period] = found = (start, end, ident)
    return found


def period_bounds(period: str, now_unix: float) -> tuple[float, float | None]:
    """The (start, end) unix times of the budget period holding ``now_unix``; end None for ``total``."""
    if period == "total":
        return 0.0, None
    start, end, _ = _period(period, now_unix)
    return start, end


def _calendar_bounds(period: str, now_unix: float) -> tuple[float, float]:
    moment = datetime.fromtimestamp(now_unix, tz=UTC)
    day = moment.replace(hour=0, minute=0, second=0, microsecond=0)
    if period == "day":
        start, end = day, day + timedelta(days=1)
    elif period == "week":
        start = day - timedelta(days=day.weekday())  # ISO weeks start on Monday
        end = start + timedelta(days=7)
    elif period == "month":
        start = day.replace(day=1)
        days = calendar.monthrange(start.year, start.month)[1]
        end = start + timedelta(days=days)
    else:
        raise ValueError(f"unknown budget period {period!r}")
    return start.timestamp(), end.timestamp()


def period_id(period: str, now_unix: float) -> str:
    """A name for the budget period holding ``now_unix``: ``day:2026-12-01``, ``week:2026-11-30``,
    ``month:2026-12``, ``total``. Spend is counted under it, so a new period starts from zero."""
    if period == "total":
        return "total"
    return _period(period, now_unix)[2]


# -- OpenAI's rate-limit headers ------------------------------------------------------------------------------

def format_reset(seconds: float) -> str:
    """A duration as OpenAI writes ``x-ratelimit-reset-*``: ``20ms``, ``6s``, ``1m0s``, ``1h2m3s``."""
    if seconds <= 0:
        return "0s"
    if seconds < 1:
        return f"{max(1, math.ceil(seconds * 1000 - 1e-6))}ms"
    whole = math.ceil(seconds - 1e-9)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes}m{secs}s"
    if minutes:
        return f"{minutes}m{secs}s"
    return f"{secs}s"


class Standing(NamedTuple):
    """Where a request leaves one dimension (requests or tokens) of its tightest scope, for the headers."""

    limit: int
    remaining: int
    reset_s: float


def standings(scopes: tuple[LimitScope, ...], counts: tuple[ScopeCounts, ...], now: float,
              admitted: bool, reservation: Reservation = NO_RESERVATION) -> tuple[Standing | None, Standing | None]:
    """(requests, tokens): the scope with the least room on each dimension, counting this request (and its
    reservation) when ``admitted``. None for a dimension no scope limits.

    ``reset`` is when the room next grows: the oldest counted request (or token bucket) leaves the window.
    The tokens' room is the limit less the window's tokens and the reservations in flight, as OpenAI's
    remaining tokens count a request's ``max_tokens`` from its admission.
    """
    requests: Standing | None = None
    tokens: Standing | None = None
    for scope, count in zip(scopes, counts, strict=True):
        limits = scope.limits
        rpm = limits.rpm
        if rpm is not None:
            remaining = max(0, rpm - count.requests - (1 if admitted else 0))
            if requests is None or remaining < requests.remaining:  # on a tie the first scope (the key's) stays
                oldest = count.oldest_request_s if count.oldest_request_s is not None else (now if admitted else None)
                requests = Standing(rpm, remaining, 0.0 if oldest is None else max(0.0, oldest + WINDOW_S - now))
        tpm = limits.tpm
        if tpm is not None:
            held = count.tokens + count.reserved_tokens + (reservation.tokens if admitted else 0)
            remaining = max(0, tpm - held)
            if tokens is None or remaining < tokens.remaining:
                oldest = count.oldest_tokens_s
                tokens = Standing(tpm, remaining, 0.0 if oldest is None else max(0.0, oldest + WINDOW_S - now))
    return requests, tokens


def rate_limit_headers(requests: Standing | None, tokens: Standing | None) -> dict[str, str]:
    """OpenAI's ``x-ratelimit-*`` headers for the dimensions that are limited."""
    out: dict[str, str] = {}
    for word, standing in (("requests", requests), ("tokens", tokens)):
        if standing is not None:
            out[f"x-ratelimit-limit-{word}"] = str(standing.limit)
            out[f"x-ratelimit-remaining-{word}"] = str(standing.remaining)
            out[f"x-ratelimit-reset-{word}"] = format_reset(standing.reset_s)
    return out
