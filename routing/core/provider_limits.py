"""Provider-side limits: the requests and tokens sent to a target in the last minute, against its provider's
``rpm`` and ``tpm`` for this account.

A target at either limit is skipped like a cooling one, so the gateway fills a provider's quota before it
routes elsewhere instead of collecting 429s. An attempt is admitted at the moment it is about to be sent:
``dispatch`` checks and counts in one step (on one event loop nothing can slip in between). It counts one
request and *reserves* the tokens it may use (``reservation``: the input estimate plus its ``max_tokens`` for
each choice), and is admitted only when the tokens already used and reserved plus its own reservation fit the
tpm. Its settlement (``settle``) replaces the reservation with the real usage; an attempt that was never sent
is taken back whole (``release``). So a burst cannot overshoot the tpm by what is in flight.

The window is 61 one-second buckets with a running total (every operation is O(1) in the history): a count
leaves it 60 to 61 seconds after it was made, never earlier, so the gateway errs on the side of the
provider's own counter.

With a shared store (Redis, ``routing.clients.provider_quota_store``) the store decides each admission for
every process at once and this registry is told so (``QuotaRegistry.shared``); the windows here keep counting
this process's own attempts, so that a store outage falls back to them, and so that planning can skip a target
this process alone has filled. Planning also skips a target the store last refused, for as long as the refusal
holds (``TargetQuota.mark_full``).

Time is a parameter (``now``: seconds on the monotonic clock). Not thread-safe: one event loop owns a registry.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

WINDOW_S = 60
CHARS_PER_TOKEN = 4  # the gateway's estimate of text tokens (as routing.core.features counts input)
_SLOTS = WINDOW_S + 1  # the current second and the 60 before it
# The output an attempt reserves when the request sets no max_tokens (the gateway passes
# GOMODEL_LIMIT_DEFAULT_OUTPUT_TOKENS, the same default as the key and team limits' reservations).
DEFAULT_OUTPUT_RESERVATION = 1024
# How long planning trusts the shared store's tpm refusal: a settlement (here or in another process) may
# return reserved tokens before the oldest count leaves, so the refusal is a hint, not a fact, after that.
TPM_REFUSAL_HINT_S = 1.0

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

    def reserved(self, tokens: int) -> int:
        """What an attempt expecting ``tokens`` reserves: nothing without a tpm, and at most the whole tpm (so a
        request larger than the minute still goes out, alone, into an empty minute, and the provider decides)."""
        if self.tpm is None:
            return 0
        return max(0, min(tokens, self.tpm))


def choices_of(value: Any) -> int:
    """The number of answers a request asks for (OpenAI's ``n``); 1 unless it is a positive integer."""
    return value if type(value) is int and value > 1 else 1


def reservation(*, input_tokens: int, max_output_tokens: int | None, choices: int = 1,
                default_output_tokens: int = DEFAULT_OUTPUT_RESERVATION) -> int:
    """The tokens an attempt reserves against its provider's tpm: its input once, and for each choice its
    ``max_tokens`` (``default_output_tokens`` when the request sets none), as providers bill them."""
    output = default_output_tokens if max_output_tokens is None else max(0, max_output_tokens)
    return max(0, input_tokens) + output * max(1, choices)


def estimated_usage(*, input_tokens: int, output_chars: int) -> int:
    """The tokens of an attempt whose provider reported no usage (a stream cut short): the input estimate and
    the output received, at ``CHARS_PER_TOKEN`` characters a token."""
    return max(0, input_tokens) + -(-max(0, output_chars) // CHARS_PER_TOKEN)


@dataclass(frozen=True, slots=True)
class QuotaRefusal:
    """Why an attempt may not go to a target now, and a lower bound on when it may (seconds, at least 1)."""

    reason: LimitReason
    retry_after_s: float


@dataclass(slots=True)
class QuotaTicket:
    """One admitted attempt's counts in its target's minute, to settle once (``settled`` says it was)."""

    target: str
    second: int  # the monotonic second of its admission: its bucket in this process's window
    reserved: int  # tokens reserved (0: the target has no tpm)
    shared_second: int | None = None  # its second on the shared store's clock; None: counted in this process only
    member: str = ""  # its entry in the shared store's request log
    settled: bool = False


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

    def adjust(self, second: int, delta: int, now_second: int) -> None:
        """Change the count made at ``second`` by ``delta`` (never below 0); once that second has left the
        window, only an increase still counts, at ``now_second`` (a reservation that fell short)."""
        self._expire(now_second)
        for bucket in reversed(self._counts):  # at most _SLOTS buckets, the recent ones first
            if bucket[0] == second:
                change = max(delta, -bucket[1])
                bucket[1] += change
                self._total += change
                return
            if bucket[0] < second:
                break
        if delta > 0:  # left the window (or counted before a reset): the shortfall counts now
            self.add(now_second, delta)

    def total(self, second: int) -> int:
        self._expire(second)
        return self._total

    def frees_at(self, second: int) -> int | None:
        """The second at which the oldest count in the window leaves it; None when the window is empty."""
        self._expire(second)
        for oldest, count in self._counts:
            if count:
                return oldest + _SLOTS
        return None

    def _expire(self, second: int) -> None:
        counts, oldest = self._counts, second - WINDOW_S
        while counts and counts[0][0] < oldest:
            self._total -= counts.popleft()[1]


class TargetQuota:
    """One target's last minute against its provider's limits, as this process counted it, and the shared
    store's last refusal."""

    __slots__ = ("name", "limits", "_requests", "_tokens", "full_until", "full_reason")

    def __init__(self, name: str, limits: ProviderLimits) -> None:
        self.name = name
        self.limits = limits
        self._requests = _Window()
        self._tokens = _Window()  # used and reserved
        self.full_until: float | None = None  # the shared store said: no room before this (monotonic)
        self.full_reason: LimitReason | None = None

    def blocked(self, now: float, *, shared: bool = False) -> LimitReason | None:
        """Why the target may not take a request now (its window is full, or the shared store's refusal still
        holds when ``shared``), or None. Planning asks this; it reserves nothing."""
        limits, second = self.limits, int(now)
        if limits.rpm is not None and self._requests.total(second) >= limits.rpm:
            return AT_RPM
        if limits.tpm is not None and self._tokens.total(second) >= limits.tpm:
            return AT_TPM
        if shared and self.full_until is not None:
            if now < self.full_until:
                return self.full_reason
            self.full_until = self.full_reason = None
        return None

    def dispatch(self, now: float, reserve: int = 0) -> QuotaTicket | QuotaRefusal:
        """Admit an attempt about to be sent (counted, ``reserve`` tokens reserved), unless the window has no
        room for it (then why, and nothing is counted)."""
        limits, second = self.limits, int(now)
        if limits.rpm is not None and self._requests.total(second) >= limits.rpm:
            return QuotaRefusal(AT_RPM, self._frees_in(self._requests, now))
        reserved = limits.reserved(reserve)
        if limits.tpm is not None and self._tokens.total(second) + reserved > limits.tpm:
            return QuotaRefusal(AT_TPM, self._frees_in(self._tokens, now))
        return self.count(now, reserved)

    def count(self, now: float, reserved: int) -> QuotaTicket:
        """Count an attempt the shared store admitted (``reserved``: already capped by ``ProviderLimits.reserved``)."""
        second = int(now)
        self._requests.add(second, 1)
        if reserved:
            self._tokens.add(second, reserved)
        return QuotaTicket(self.name, second, reserved)

    def settle(self, ticket: QuotaTicket, tokens: int, now: float) -> None:
        """Replace the ticket's reservation with the tokens it really used (input + output)."""
        if self.limits.tpm is not None and tokens != ticket.reserved:
            self._tokens.adjust(ticket.second, max(0, tokens) - ticket.reserved, int(now))

    def release(self, ticket: QuotaTicket, now: float) -> None:
        """Take back an attempt that was never sent: its request and its reservation."""
        self._requests.adjust(ticket.second, -1, int(now))
        if ticket.reserved:
            self._tokens.adjust(ticket.second, -ticket.reserved, int(now))

    def mark_full(self, refusal: QuotaRefusal, now: float) -> None:
        """The shared store refused an attempt: planning skips the target until the refusal may have lapsed (an
        rpm refusal holds until its oldest request leaves; a tpm one at most ``TPM_REFUSAL_HINT_S``)."""
        hold = refusal.retry_after_s if refusal.reason == AT_RPM else min(refusal.retry_after_s, TPM_REFUSAL_HINT_S)
        self.full_until, self.full_reason = now + hold, refusal.reason

    def retry_after_s(self, now: float, *, shared: bool = False) -> float:
        """A lower bound on when the window has room again: when its oldest count leaves it (at least 1 s)."""
        if shared and self.full_until is not None and now < self.full_until:
            return max(1.0, self.full_until - now)
        second = int(now)
        candidates = [f for f in (self._requests.frees_at(second), self._tokens.frees_at(second)) if f is not None]
        return max(1.0, min(candidates) - now) if candidates else 1.0

    def counts(self, now: float) -> tuple[int, int]:
        """(requests, tokens used and reserved) in this process's window."""
        second = int(now)
        return self._requests.total(second), self._tokens.total(second)

    @staticmethod
    def _frees_in(window: _Window, now: float) -> float:
        frees_at = window.frees_at(int(now))
        return 1.0 if frees_at is None else max(1.0, frees_at - now)


class QuotaRegistry:
    """Target name -> TargetQuota, for the targets whose model carries a provider limit.

    ``configure`` follows each routing table: new limits apply at once and the counts are kept (a limit
    edited in the admin does not forget the minute already spent). A target without limits has no entry,
    so the check costs one dict lookup for it. ``shared`` is True while a shared store decides admissions.
    """

    __slots__ = ("_quotas", "shared")

    def __init__(self) -> None:
        self._quotas: dict[str, TargetQuota] = {}
        self.shared = False

    def configure(self, limits: Mapping[str, ProviderLimits]) -> None:
        kept: dict[str, TargetQuota] = {}
        for name, target_limits in limits.items():
            if not target_limits.any:
                continue
            quota = self._quotas.get(name)
            if quota is None:
                quota = TargetQuota(name, target_limits)
            else:
                quota.limits = target_limits
            kept[name] = quota
        self._quotas = kept

    def get(self, name: str) -> TargetQuota | None:
        return self._quotas.get(name)

    def blocked(self, name: str, now: float) -> LimitReason | None:
        quota = self._quotas.get(name)
        return None if quota is None else quota.blocked(now, shared=self.shared)

    def dispatch(self, name: str, now: float, reserve: int = 0) -> QuotaTicket | QuotaRefusal | None:
        """Admit an attempt in this process's window; None for a target without limits."""
        quota = self._quotas.get(name)
        return None if quota is None else quota.dispatch(now, reserve)

    def settle(self, ticket: QuotaTicket, tokens: int, now: float) -> None:
        quota = self._quotas.get(ticket.target)
        if quota is not None:
            quota.settle(ticket, tokens, now)

    def release(self, ticket: QuotaTicket, now: float) -> None:
        quota = self._quotas.get(ticket.target)
        if quota is not None:
            quota.release(ticket, now)

    def retry_after_s(self, name: str, now: float) -> float:
        quota = self._quotas.get(name)
        return 1.0 if quota is None else quota.retry_after_s(now, shared=self.shared)

    def quotas(self) -> Iterable[TargetQuota]:
        return tuple(self._quotas.values())

    def reset(self) -> None:
        """Forget the counts (tests, the admin's reset); the limits stay."""
        self._quotas = {name: TargetQuota(name, quota.limits) for name, quota in self._quotas.items()}

    def __len__(self) -> int:
        return len(self._quotas)
