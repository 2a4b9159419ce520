"""Counting limits in memory: sliding logs of requests, token buckets, slots, reservations, spend per period.

The in-process limit store is this ledger behind a lock; the Redis store keeps the same counts in Redis and
falls back to one of these while Redis is away. Pure: the time is a parameter (unix seconds, since budget
periods are calendar periods), nothing here does I/O.

Tokens are counted in one-second buckets (the second an answer settled in), so a check costs the same whatever
the history: at most 61 buckets are alive. A bucket leaves the window once all of it is older than 60 seconds,
so an answer's tokens count for 60 to 61 seconds.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from typing import NamedTuple

from routing.core.limits import (
    NO_RESERVATION,
    WINDOW_S,
    LimitScope,
    Refusal,
    Reservation,
    ScopeCounts,
    Standing,
    decide,
    period_bounds,
    period_id,
    standings,
)

DEFAULT_SLOT_LEASE_S = 1800.0  # a slot or reservation whose release never came (a killed process) lapses after this


class AdmissionVerdict(NamedTuple):
    """The answer to one admission: refused (with the limit) or admitted, and the headers' standings (a named
    tuple: one is built per request)."""

    refusal: Refusal | None
    requests: Standing | None
    tokens: Standing | None

    @property
    def admitted(self) -> bool:
        return self.refusal is None


def verdict_of(scopes: tuple[LimitScope, ...], counts: tuple[ScopeCounts, ...], now: float,
               reservation: Reservation = NO_RESERVATION) -> AdmissionVerdict:
    """The verdict for counts taken before this request: refused by ``decide``, or admitted and counted."""
    ends = tuple(period_bounds(s.limits.budget_period, now)[1] for s in scopes)
    refusal = decide(scopes, counts, now, ends, reservation)
    requests, tokens = standings(scopes, counts, now, admitted=refusal is None, reservation=reservation)
    return AdmissionVerdict(refusal, requests, tokens)


def token_threshold(tpm: int, own: int) -> int:
    """The most tokens a window may hold for a request reserving ``own`` to fit (and always below ``tpm``)."""
    return min(tpm - own, tpm - 1)


def tokens_retry(buckets: list[tuple[int, int]], total: int, threshold: int) -> float | None:
    """When a window of ``buckets`` (second, tokens; oldest first) summing to ``total`` holds at most
    ``threshold``: the end of the bucket whose leaving brings it there, 60 seconds on; None if none does."""
    for second, tokens in buckets:
        if total <= threshold:
            break
        total -= tokens
        if total <= threshold:
            return second + 1 + WINDOW_S
    return None


@dataclass
class _ScopeState:
    requests: deque[float] = field(default_factory=deque)
    buckets: deque[list[int]] = field(default_factory=deque)  # [second, tokens], oldest first
    token_sum: int = 0
    slots: dict[str, float] = field(default_factory=dict)  # request id -> when the slot lapses
    reservations: dict[str, tuple[float, Reservation]] = field(default_factory=dict)  # request id -> (lapses, held)
    reserved_tokens: int = 0
    reserved_nanos: int = 0
    spend: dict[str, int] = field(default_factory=dict)  # period id -> nano-dollars

    def trim(self, now: float) -> None:
        cutoff = now - WINDOW_S
        requests = self.requests
        while requests and requests[0] <= cutoff:
            requests.popleft()
        buckets = self.buckets
        while buckets and buckets[0][0] + 1 <= cutoff:
            self.token_sum -= buckets.popleft()[1]
        if self.slots:
            for request_id in [r for r, until in self.slots.items() if until <= now]:
                del self.slots[request_id]
        if self.reservations:
            for request_id in [r for r, (until, _) in self.reservations.items() if until <= now]:
                self.release(request_id)

    def release(self, request_id: str) -> None:
        held = self.reservations.pop(request_id, None)
        if held is not None:
            self.reserved_tokens -= held[1].tokens
            self.reserved_nanos -= held[1].nanos

    def add_tokens(self, tokens: int, now: float) -> None:
        second = math.floor(now)
        buckets = self.buckets
        if buckets and buckets[-1][0] >= second:
            buckets[-1][1] += tokens  # a clock that went back a little counts in the newest bucket
        else:
            buckets.append([second, tokens])
        self.token_sum += tokens

    def counts(self, scope: LimitScope, now: float, own: Reservation = NO_RESERVATION) -> ScopeCounts:
        self.trim(now)
        limits = scope.limits
        retry = None
        tpm = limits.tpm
        if tpm is not None and (self.token_sum >= tpm or self.token_sum + own.tokens > tpm):
            retry = tokens_retry([(b[0], b[1]) for b in self.buckets], self.token_sum,
                                 token_threshold(tpm, own.tokens))
        return ScopeCounts(
            requests=len(self.requests),
            oldest_request_s=self.requests[0] if self.requests else None,
            tokens=self.token_sum,
            oldest_tokens_s=float(self.buckets[0][0]) if self.buckets else None,
            tokens_retry_s=retry,
            slots=len(self.slots),
            spend_nanos=self.spend.get(period_id(limits.budget_period, now), 0),
            reserved_tokens=self.reserved_tokens,
            reserved_nanos=self.reserved_nanos,
        )


class LimitLedger:
    """Counts for every key and team of this process (bounded by the configuration's keys and teams)."""

    def __init__(self, *, slot_lease_s: float = DEFAULT_SLOT_LEASE_S) -> None:
        self.slot_lease_s = slot_lease_s
        self._scopes: dict[str, _ScopeState] = {}

    def _state(self, scope: LimitScope) -> _ScopeState:
        state = self._scopes.get(scope.ident)
        if state is None:
            state = self._scopes[scope.ident] = _ScopeState()
        return state

    def admit(self, scopes: tuple[LimitScope, ...], request_id: str, now: float,
              reservation: Reservation = NO_RESERVATION) -> AdmissionVerdict:
        """Check every scope, then count the request (and hold its reservation) in all of them, or in none when
        one refuses."""
        states = [self._state(scope) for scope in scopes]
        counts = tuple(state.counts(scope, now, reservation) for state, scope in zip(states, scopes, strict=True))
        verdict = verdict_of(scopes, counts, now, reservation)
        if verdict.admitted:
            lapses = now + self.slot_lease_s
            for state, scope in zip(states, scopes, strict=True):
                limits = scope.limits
                if limits.rpm is not None:
                    state.requests.append(now)
                if limits.max_concurrency is not None:
                    state.slots[request_id] = lapses
                held = Reservation(reservation.tokens if limits.tpm is not None else 0,
                                   reservation.nanos if limits.budget_usd is not None else 0)
                if held.tokens or held.nanos:
                    state.reservations[request_id] = (lapses, held)
                    state.reserved_tokens += held.tokens
                    state.reserved_nanos += held.nanos
        return verdict

    def settle(self, scopes: tuple[LimitScope, ...], request_id: str, *, tokens: int, spend_nanos: int,
               now: float, spent: list[tuple[LimitScope, int]] | None = None) -> None:
        """The answer ended: release its slot and its reservation, count its tokens and its spend. ``spent``, when
        given, gets each budgeted scope with its period's spend after this answer (what budget alerts compare)."""
        for scope in scopes:
            state = self._state(scope)
            state.slots.pop(request_id, None)
            state.release(request_id)
            limits = scope.limits
            if tokens > 0 and limits.tpm is not None:
                state.trim(now)
                state.add_tokens(tokens, now)
            if spend_nanos > 0 and limits.budget_usd is not None:
                after = self.add_spend(scope, spend_nanos, now)
                if spent is not None:
                    spent.append((scope, after))

    def add_spend(self, scope: LimitScope, spend_nanos: int, now: float) -> int:
        """Count spend toward the scope's current budget period (a new period drops the last one's); the period's
        spend after it."""
        state = self._state(scope)
        current = period_id(scope.limits.budget_period, now)
        kind = current.split(":", 1)[0]
        for stale in [p for p in state.spend if p != current and p.split(":", 1)[0] == kind]:
            del state.spend[stale]
        total = state.spend[current] = state.spend.get(current, 0) + spend_nanos
        return total

    def spend(self, scope: LimitScope, now: float) -> int:
        """The nano-dollars counted toward the scope's current budget period."""
        state = self._scopes.get(scope.ident)
        return 0 if state is None else state.spend.get(period_id(scope.limits.budget_period, now), 0)

    def counts(self, scope: LimitScope, now: float) -> ScopeCounts:
        """The scope's counts at ``now`` (the admin's view)."""
        return self._state(scope).counts(scope, now)

    def clear(self) -> None:
        self._scopes.clear()
