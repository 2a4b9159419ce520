"""Provider-side limits: the requests and tokens sent to a target in the last minute, against its provider's
``rpm`` and ``tpm`` for this account.

A target at either limit is skipped like a cooling one, so the gateway fills a provider's quota before it
routes elsewhere instead of collecting 429s. Requests count when they are dispatched (``dispatch`` checks and
counts in one step: on one event loop nothing can slip in between); tokens count from the real usage of each
answer (``add_tokens``), so a target is admitted while its window still has room and a token overshoot is
bounded by what is in flight.

The window is 61 one-second buckets: a request leaves it 60 to 61 seconds after it was sent, never earlier,
so the gateway errs on the side of the provider's own counter.

Shared across processes (``routing.gateway.shared_sync``): each ``TargetQuota`` also keeps the window totals
of every process as the shared store last reported them (``shared``), and what this process counted since it
last reported (``take_pending``). While the shared view is fresh the check reads ``shared + pending``; when it
is stale (the store unreachable) it reads this process's own window, as without the store.

Time is a parameter (``now``: seconds on the monotonic clock). Not thread-safe: one event loop owns a registry.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

WINDOW_S = 60
_SLOTS = WINDOW_S + 1  # the current second and the 60 before it

LimitReason = Literal["at_provider_rpm", "at_provider_tpm"]
AT_RPM: LimitReason = "at_provider_rpm"
AT_TPM: LimitReason = "at_provider_tpm"
LIMIT_REASONS = frozenset({AT_RPM, AT_TPM})


@dataclass(frozen=True, slots=True)
class ProviderLimits:
    """A target's provider limits; None: no limit of that kind."""

    rpm: int | None = None
    tpm: int | None = None

    def __post_init__(self) -> None:
        if (self.rpm is not None and self.rpm < 1) or (self.tpm is not None and self.tpm < 1):
            raise ValueError("rpm and tpm must be >= 1")

    @property
    def any(self) -> bool:
        return self.rpm is not None or self.tpm is not None


class _Window:
    """Counts per whole second over the last ``_SLOTS`` seconds, with a running total (the check is O(1)).

    Seconds only move forward (the monotonic clock), so the counts form a queue, oldest first.
    """

    __slots__ = ("_counts", "_total")

    def __init__(self) -> None:
        self._counts: deque[list[int]] = deque()  # [second, count], oldest first, at most _SLOTS of them
        self._total = 0

    def add(self, second: int, amount: int) -> None:
        counts = self._counts
        if counts and counts[-1][0] >= second:
            counts[-1][1] += amount  # the same second (or a clock that did not move forward)
        else:
            counts.append([second, amount])
        self._total += amount
        self._expire(second)

    def total(self, second: int) -> int:
        self._expire(second)
        return self._total

    def frees_at(self, second: int) -> int | None:
        """The second at which the oldest count in the window leaves it; None when the window is empty."""
        self._expire(second)
        return self._counts[0][0] + _SLOTS if self._counts else None

    def _expire(self, second: int) -> None:
        counts, oldest = self._counts, second - WINDOW_S
        while counts and counts[0][0] < oldest:
            self._total -= counts.popleft()[1]


class TargetQuota:
    """One target's last minute against its provider's limits, in this process and as last shared."""

    __slots__ = ("name", "limits", "_requests", "_tokens", "shared_requests", "shared_tokens", "shared_at",
                 "shared_frees_in_s", "_pending", "_reporting", "_unshared", "sharing")

    def __init__(self, name: str, limits: ProviderLimits) -> None:
        self.name = name
        self.limits = limits
        self._requests = _Window()
        self._tokens = _Window()
        self.shared_requests = 0  # every process's window totals as the shared store last reported them
        self.shared_tokens = 0
        self.shared_at: float | None = None  # when (monotonic) they were reported; None: never
        self.shared_frees_in_s: float | None = None  # when the shared window's oldest count leaves, as reported
        self._pending: dict[int, list[int]] = {}  # second -> [requests, tokens] not yet reported
        self._reporting: dict[int, list[int]] = {}  # taken by a report still on its way
        self._unshared = [0, 0]  # requests and tokens in _pending and _reporting together (what the store lacks)
        self.sharing = False  # whether counts are kept for reports (only while a shared store syncs them)

    def _totals(self, now: float, shared_ttl_s: float) -> tuple[int, int]:
        shared_at = self.shared_at
        if shared_at is not None and now - shared_at <= shared_ttl_s:
            unshared = self._unshared
            return self.shared_requests + unshared[0], self.shared_tokens + unshared[1]
        second = int(now)
        return self._requests.total(second), self._tokens.total(second)

    def blocked(self, now: float, shared_ttl_s: float = 0.0) -> LimitReason | None:
        """Why the target may not take a request now (its window is full), or None."""
        limits = self.limits
        requests, tokens = self._totals(now, shared_ttl_s)
        if limits.rpm is not None and requests >= limits.rpm:
            return AT_RPM
        if limits.tpm is not None and tokens >= limits.tpm:
            return AT_TPM
        return None

    def dispatch(self, now: float, shared_ttl_s: float = 0.0) -> LimitReason | None:
        """Count a request about to be sent, unless the window is full (then why, and nothing is counted)."""
        reason = self.blocked(now, shared_ttl_s)
        if reason is None:
            self._count(now, 1, 0)
        return reason

    def add_tokens(self, tokens: int, now: float) -> None:
        """Count the real usage of an answer (input + output tokens)."""
        if tokens > 0 and self.limits.tpm is not None:
            self._count(now, 0, tokens)

    def retry_after_s(self, now: float, shared_ttl_s: float = 0.0) -> float:
        """A lower bound on when the window has room again: when its oldest count leaves it (at least 1 s)."""
        shared_at = self.shared_at
        if shared_at is not None and now - shared_at <= shared_ttl_s:
            frees_in = self.shared_frees_in_s
            return max(1.0, 1.0 if frees_in is None else frees_in - (now - shared_at))
        second = int(now)
        candidates = [f for f in (self._requests.frees_at(second), self._tokens.frees_at(second)) if f is not None]
        return max(1.0, min(candidates) - now) if candidates else 1.0

    def take_pending(self) -> dict[int, list[int]]:
        """What this process counted since it last reported, by monotonic second, for a report.

        The counts stay in the check (as being reported) until ``adopt_shared`` or ``report_failed``.
        """
        pending, self._pending = self._pending, {}
        for second, (requests, tokens) in pending.items():
            counts = self._reporting.setdefault(second, [0, 0])
            counts[0] += requests
            counts[1] += tokens
        return pending

    def report_failed(self, now: float) -> None:
        """The report did not arrive: its counts wait for the next one (while still inside the window)."""
        oldest = int(now) - WINDOW_S
        for second, (requests, tokens) in self._reporting.items():
            if second < oldest:  # out of the window: it no longer counts anywhere
                self._unshared[0] -= requests
                self._unshared[1] -= tokens
                continue
            counts = self._pending.setdefault(second, [0, 0])
            counts[0] += requests
            counts[1] += tokens
        self._reporting = {}

    def adopt_shared(self, requests: int, tokens: int, frees_in_s: float | None, now: float) -> None:
        """The shared store's window totals after a report (every process, this one's reported counts included)."""
        self.shared_requests = requests
        self.shared_tokens = tokens
        self.shared_frees_in_s = frees_in_s
        self.shared_at = now
        for requests, tokens in self._reporting.values():  # now inside the shared totals
            self._unshared[0] -= requests
            self._unshared[1] -= tokens
        self._reporting = {}

    def counts(self, now: float, shared_ttl_s: float = 0.0) -> tuple[int, int]:
        """(requests, tokens) in the window as the check sees them."""
        return self._totals(now, shared_ttl_s)

    def _count(self, now: float, requests: int, tokens: int) -> None:
        second = int(now)
        if requests:
            self._requests.add(second, requests)
        if tokens:
            self._tokens.add(second, tokens)
        if not self.sharing:
            return
        counts = self._pending.get(second)
        if counts is None:
            self._pending[second] = [requests, tokens]
        else:
            counts[0] += requests
            counts[1] += tokens
        self._unshared[0] += requests
        self._unshared[1] += tokens


class QuotaRegistry:
    """Target name -> TargetQuota, for the targets whose model carries a provider limit.

    ``configure`` follows each routing table: new limits apply at once and the counts are kept (a limit
    edited in the admin does not forget the minute already spent). A target without limits has no entry,
    so the check costs one dict lookup for it.
    """

    __slots__ = ("_quotas", "_shared_ttl_s")

    def __init__(self, shared_ttl_s: float = 0.0) -> None:
        self._quotas: dict[str, TargetQuota] = {}
        self._shared_ttl_s = shared_ttl_s

    @property
    def shared_ttl_s(self) -> float:
        """How long a shared report is trusted; 0: there is no shared store (counts are not kept for reports)."""
        return self._shared_ttl_s

    @shared_ttl_s.setter
    def shared_ttl_s(self, value: float) -> None:
        self._shared_ttl_s = value
        for quota in self._quotas.values():
            quota.sharing = value > 0

    def configure(self, limits: Mapping[str, ProviderLimits]) -> None:
        kept: dict[str, TargetQuota] = {}
        for name, target_limits in limits.items():
            if not target_limits.any:
                continue
            quota = self._quotas.get(name)
            if quota is None:
                quota = TargetQuota(name, target_limits)
                quota.sharing = self._shared_ttl_s > 0
            else:
                quota.limits = target_limits
            kept[name] = quota
        self._quotas = kept

    def get(self, name: str) -> TargetQuota | None:
        return self._quotas.get(name)

    def blocked(self, name: str, now: float) -> LimitReason | None:
        quota = self._quotas.get(name)
        return None if quota is None else quota.blocked(now, self._shared_ttl_s)

    def dispatch(self, name: str, now: float) -> LimitReason | None:
        quota = self._quotas.get(name)
        return None if quota is None else quota.dispatch(now, self._shared_ttl_s)

    def add_tokens(self, name: str, tokens: int, now: float) -> None:
        quota = self._quotas.get(name)
        if quota is not None:
            quota.add_tokens(tokens, now)

    def retry_after_s(self, name: str, now: float) -> float:
        quota = self._quotas.get(name)
        return 1.0 if quota is None else quota.retry_after_s(now, self.shared_ttl_s)

    def quotas(self) -> Iterable[TargetQuota]:
        return tuple(self._quotas.values())

    def reset(self) -> None:
        """Forget the counts (tests, the admin's reset); the limits stay."""
        self._quotas = {name: TargetQuota(name, quota.limits) for name, quota in self._quotas.items()}
        self.shared_ttl_s = self._shared_ttl_s

    def __len__(self) -> int:
        return len(self._quotas)
