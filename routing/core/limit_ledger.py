"""Counting limits in memory: sliding logs of requests and tokens, concurrency slots, spend per period.

The in-process limit store is this ledger behind a lock; the Redis store keeps the same counts in Redis and
falls back to one of these while Redis is away. Pure: the time is a parameter (unix seconds, since budget
periods are calendar periods), nothing here does I/O.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import NamedTuple

from routing.core.limits import (
    WINDOW_S,
    LimitScope,
    Refusal,
    ScopeCounts,
    Standing,
    decide,
    period_bounds,
    period_id,
    standings,
)

DEFAULT_SLOT_LEASE_S = 1800.0  # a slot whose release never came (a killed process) is returned after this


class Verdict(NamedTuple):
    """The answer to one admission: refused (with the limit) or admitted, and the headers' standings (a named
    tuple: one is built per request)."""

    refusal: Refusal | None
    requests: Standing | None
    tokens: Standing | None

    @property
    def admitted(self) -> bool:
        return self.refusal is None


def verdict_of(scopes: tuple[LimitScope, ...], counts: tuple[ScopeCounts, ...], now: float) -> Verdict:
    """The verdict for counts taken before this request: refused by ``decide``, or admitted and counted."""
    ends = tuple(period_bounds(s.limits.budget_period, now)[1] for s in scopes)
    refusal = decide(scopes, counts, now, ends)
    requests, tokens = standings(scopes, counts, now, admitted=refusal is None)
    return Verdict(refusal, requests, tokens)


@dataclass
class _ScopeState:
    requests: deque[float] = field(default_factory=deque)
    tokens: deque[tuple[float, int]] = field(default_factory=deque)
    token_sum: int = 0
    slots: dict[str, float] = field(default_factory=dict)  # request id -> when the slot lapses
    spend: dict[str, int] = field(default_factory=dict)  # period id -> nano-dollars

    def trim(self, now: float) -> None:
        cutoff = now - WINDOW_S
        requests = self.requests
        while requests and requests[0] <= cutoff:
            requests.popleft()
        tokens = self.tokens
        while tokens and tokens[0][0] <= cutoff:
            self.token_sum -= tokens.popleft()[1]
        if self.slots:
            for request_id in [r for r, until in self.slots.items() if until <= now]:
                del self.slots[request_id]

    def counts(self, scope: LimitScope, now: float) -> ScopeCounts:
        self.trim(now)
        limits = scope.limits
        retry = None
        if limits.tpm is not None and self.token_sum >= limits.tpm:
            retry = _tokens_retry(self.tokens, self.token_sum, limits.tpm)
        return ScopeCounts(
            requests=len(self.requests),
            oldest_request_s=self.requests[0] if self.requests else None,
            tokens=self.token_sum,
            oldest_tokens_s=self.tokens[0][0] if self.tokens else None,
            tokens_retry_s=retry,
            slots=len(self.slots),
            spend_nanos=self.spend.get(period_id(limits.budget_period, now), 0),
        )


def _tokens_retry(entries: deque[tuple[float, int]], total: int, limit: int) -> float | None:
    """When the window's tokens fall below ``limit``: the time the entry that brings them below leaves."""
    for at, tokens in entries:
        total -= tokens
        if total < limit:
            return at + WINDOW_S
    return None


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

    def admit(self, scopes: tuple[LimitScope, ...], request_id: str, now: float) -> Verdict:
        """Check every scope, then count the request in all of them, or in none when one refuses."""
        states = [self._state(scope) for scope in scopes]
        counts = tuple(state.counts(scope, now) for state, scope in zip(states, scopes, strict=True))
        verdict = verdict_of(scopes, counts, now)
        if verdict.admitted:
            for state, scope in zip(states, scopes, strict=True):
                limits = scope.limits
                if limits.rpm is not None:
                    state.requests.append(now)
                if limits.max_concurrency is not None:
                    state.slots[request_id] = now + self.slot_lease_s
        return verdict

    def settle(self, scopes: tuple[LimitScope, ...], request_id: str, *, tokens: int, spend_nanos: int,
               now: float) -> None:
        """The answer ended: release its slot, count its tokens and its spend."""
        for scope in scopes:
            state = self._state(scope)
            state.slots.pop(request_id, None)
            limits = scope.limits
            if tokens > 0 and limits.tpm is not None:
                state.trim(now)
                state.tokens.append((now, tokens))
                state.token_sum += tokens
            if spend_nanos > 0 and limits.budget_usd is not None:
                current = period_id(limits.budget_period, now)
                kind = current.split(":", 1)[0]
                for stale in [p for p in state.spend if p != current and p.split(":", 1)[0] == kind]:
                    del state.spend[stale]
                state.spend[current] = state.spend.get(current, 0) + spend_nanos

    def counts(self, scope: LimitScope, now: float) -> ScopeCounts:
        """The scope's counts at ``now`` (the admin's view)."""
        return self._state(scope).counts(scope, now)

    def clear(self) -> None:
        self._scopes.clear()
