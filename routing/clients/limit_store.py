"""Limit stores: where the counts behind per-key and per-team limits live.

Two implementations share one protocol:

* ``ProcessLimitStore`` counts in this process (``routing.core.limit_ledger``): the embedded default.
  With several worker processes or replicas each counts on its own, so a limit holds per process.
* ``RedisLimitStore`` counts in Redis, so the limits hold across every process and host. A request costs
  one round trip and one write, each one Lua script (atomic in Redis, ``routing.clients.limit_scripts``):
  ``admit`` checks every limit of the key and its team and counts the request in all of them or none, and
  waits for the answer; ``settle`` releases the concurrency slot and adds the answer's tokens and spend. A
  settlement is not waited for: it is written at once, or with the write of the commands already queued in this
  turn of the event loop (the caller then yields once before answering its client), so Redis has it before the
  client has its answer; its answer, or its failure, is handled when it comes.
  Windows run on Redis's clock (``TIME``), so replicas with skewed clocks still share one window.

When Redis cannot be reached (refused, no answer within ``socket_timeout``, an error reply), the request is
counted by an in-process ledger instead: a warning is logged once when Redis goes away and an info line
when it answers again, and Redis is asked again at most every ``retry_after_s``. A request is never failed
because Redis is away. An admission remembers where it was counted, and is settled there.

Admission holds the request's reservation (what it may cost at most, ``routing.core.limits.Reservation``) until
its settlement replaces it with what the answer used.

Spend is durable: a store given a ``spend_source`` (the audit trail's sums, ``audit.selectors``) seeds a
budget period's spend from the database before it counts the first request of that period (the process store),
or whenever the Redis key is missing (evicted, or Redis restarted empty): a missing key is never read as zero.

Budget alerts (``routing.core.budget_alerts``): a store given thresholds compares each settlement's spend before and
after against them, claims a crossed threshold once per scope and period (in Redis, in the settlement's own script;
in this process's memory otherwise) and hands it to ``on_crossing``, which must not block. A seed never crosses
anything: what the database already counted was settled, and alerted, before.

Keys (``prefix`` defaults to ``gomodel:limit:``): ``<prefix><scope>:req`` (sorted set of admission times),
``:tok`` (one-second token buckets), ``:slots`` (request ids by lease end), ``:spend:<period>`` (nano-dollars),
``:spend:<period>:alerts`` (the budget alert thresholds claimed), ``:resv``, ``:resvamt``, ``:resvsum`` (the
reservations in flight: ids by lease end, amounts, sums).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import math
import threading
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Protocol

from routing.clients.limit_scripts import (
    ADMITTED,
    COUNTS,
    COUNTS_PER_SCOPE,
    KEYS_PER_SCOPE,
    LIMITS,
    SPEND_MISSING,
    admit_reply,
    claimed_thresholds,
    counts_at,
)
from routing.clients.redis_client import RedisReplyError, RedisUnavailable, RespClient, ScriptCall, Sent
from routing.core.budget_alerts import BudgetCrossing, alert_levels, crossed
from routing.core.limit_ledger import DEFAULT_SLOT_LEASE_S, AdmissionVerdict, LimitLedger, verdict_of
from routing.core.limits import (
    NO_RESERVATION,
    WINDOW_S,
    LimitScope,
    Refusal,
    Reservation,
    ScopeCounts,
    period_bounds,
    period_id,
)

logger = logging.getLogger("gomodel.limits")

DEFAULT_PREFIX = "gomodel:limit:"
_MAX_ENCODED = 10_000  # keys whose encoded script arguments are kept (cleared past it; rebuilt on use)
_UNAVAILABLE = (RedisUnavailable, RedisReplyError, OSError)
_SEED_TIMEOUT_S = 5.0  # a spend sum from the database that takes longer than this is treated as unavailable
_SEED_RETRY_S = 5.0  # after a failed seed, the process store asks the database again at most this often

# The spend of a scope since a unix time, in nano-dollars, from the database (the audit trail): seeds budgets.
SpendSource = Callable[[LimitScope, float], Coroutine[Any, Any, int]]
# Told of each budget alert threshold a store claimed; called on the event loop, it must not block.
OnCrossing = Callable[[BudgetCrossing], None]


class SpendUnavailable(Exception):
    """A budget's spend is not in Redis and the database could not say what it is: the request cannot be
    admitted against that budget (the gateway answers 503; a missing spend is never read as zero)."""

    def __init__(self, scope: LimitScope) -> None:
        super().__init__(f'the spend of {scope.kind} "{scope.name}" could not be read from Redis or the database')
        self.scope = scope


@dataclass(frozen=True, slots=True)
class Admission:
    """One request's admission: the verdict, and where it was counted (so it is settled there)."""

    scopes: tuple[LimitScope, ...]
    request_id: str
    verdict: AdmissionVerdict
    in_redis: bool
    reservation: Reservation = NO_RESERVATION
    # Counted in this process after Redis did not answer in time: Redis may still have run the script and
    # taken a slot, which the settlement then also returns there.
    maybe_in_redis: bool = False


class LimitStore(Protocol):
    @property
    def shared(self) -> bool:
        """Whether the counts are shared by every process (Redis reachable), or this process's own."""
        ...

    async def admit(self, scopes: tuple[LimitScope, ...], request_id: str,
                    reservation: Reservation = NO_RESERVATION) -> Admission: ...

    def settle(self, admission: Admission, *, tokens: int, spend_nanos: int) -> bool:
        """Release the slot and count the tokens and spend; never waits (a cancelled request's task can call it).

        True when the settlement goes to Redis with this turn of the event loop's write (other commands were
        queued): a caller about to answer its client yields once first (``await asyncio.sleep(0)``), so that Redis
        has the settlement before the client has the answer (when nothing was queued it was written at once).
        Its answer from Redis, or its failure, is handled when it comes.
        """
        ...

    async def counts(self, scope: LimitScope) -> ScopeCounts:
        """A scope's counts now (the admin's view); does not change them."""
        ...

    async def aclose(self) -> None:
        """Close, once the settlements already sent are applied (bounded by the store's timeout)."""
        ...


class ProcessLimitStore:
    """Limits counted in this process only; budgets seeded from the database once per period (``spend_source``)."""

    def __init__(self, *, slot_lease_s: float = DEFAULT_SLOT_LEASE_S,
                 clock: Callable[[], float] = time.time, spend_source: SpendSource | None = None,
                 alert_thresholds: tuple[int, ...] = (), on_crossing: OnCrossing | None = None) -> None:
        self.ledger = LimitLedger(slot_lease_s=slot_lease_s)
        self.alert_thresholds = alert_thresholds if on_crossing is not None else ()
        self._on_crossing = on_crossing
        # (scope ident, period id) -> the thresholds claimed in that period; one entry per scope (a new period
        # replaces the last one's), so it is bounded by the configured keys and teams.
        self._claimed: dict[str, tuple[str, set[int]]] = {}
        self._levels: dict[float | None, tuple[int, ...]] = {}  # budget_usd -> the thresholds' levels (nano-dollars)
        self._clock = clock
        self._lock = threading.Lock()  # the admin reads from another thread
        self._spend_source = spend_source
        # (scope ident, period id) -> True once seeded, or the unix time before which a failed seed is not retried
        self._seeded: dict[tuple[str, str], bool | float] = {}
        self._seeding: dict[tuple[str, str], asyncio.Future[None]] = {}

    @property
    def shared(self) -> bool:
        return False

    async def admit(self, scopes: tuple[LimitScope, ...], request_id: str,
                    reservation: Reservation = NO_RESERVATION) -> Admission:
        if self._spend_source is not None:
            for scope in scopes:
                if scope.limits.budget_usd is not None:
                    await self._seed(scope)
        with self._lock:
            verdict = self.ledger.admit(scopes, request_id, self._clock(), reservation)
        return Admission(scopes, request_id, verdict, in_redis=False, reservation=reservation)

    async def _seed(self, scope: LimitScope) -> None:
        """Count what the database says this scope spent this period, once per period and process: a restart
        does not forget a budget. Concurrent first requests wait for one read."""
        now = self._clock()
        slot = (scope.ident, period_id(scope.limits.budget_period, now))
        seeded = self._seeded.get(slot)
        if seeded is True or (isinstance(seeded, float) and now < seeded):
            return
        pending = self._seeding.get(slot)
        if pending is not None:
            await asyncio.shield(pending)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._seeding[slot] = future
        try:
            spent = await _spend_since(self._spend_source, scope, now)
            if spent is None:
                # The database did not answer: counted from what this process sees, asked again in a while (a
                # later seed may then count this process's own spend twice, which errs on the budget's side).
                self._seeded[slot] = now + _SEED_RETRY_S
                return
            with self._lock:
                if spent > 0:
                    self.ledger.add_spend(scope, spent, now)
            self._seeded[slot] = True
            if len(self._seeded) > _MAX_ENCODED:
                self._seeded = {s: v for s, v in self._seeded.items() if v is True}
        finally:
            del self._seeding[slot]
            future.set_result(None)

    def settle(self, admission: Admission, *, tokens: int, spend_nanos: int) -> bool:
        if spend_nanos <= 0 or not self.alert_thresholds:
            with self._lock:
                self.ledger.settle(admission.scopes, admission.request_id, tokens=tokens, spend_nanos=spend_nanos,
                                   now=self._clock())
            return False
        spent: list[tuple[LimitScope, int]] = []
        crossings: list[BudgetCrossing] = []
        with self._lock:
            now = self._clock()
            self.ledger.settle(admission.scopes, admission.request_id, tokens=tokens, spend_nanos=spend_nanos,
                               now=now, spent=spent)
            for scope, after in spent:
                levels = self._levels.get(scope.limits.budget_usd) or self._levels_of(scope)
                # Most settlements stay below the first level, or are past the last: two compares.
                if after >= levels[0] and after - spend_nanos < levels[-1]:
                    crossings += self._claim(scope, levels, after - spend_nanos, after, now)
        for crossing in crossings:
            _hand_over(self._on_crossing, crossing)
        return False

    def _levels_of(self, scope: LimitScope) -> tuple[int, ...]:
        if len(self._levels) >= _MAX_ENCODED:
            self._levels.clear()
        levels = self._levels[scope.limits.budget_usd] = alert_levels(scope.limits.budget_nanos or 0,
                                                                       self.alert_thresholds)
        return levels

    def _claim(self, scope: LimitScope, levels: tuple[int, ...], before: int, after: int,
               now: float) -> list[BudgetCrossing]:
        """The thresholds this settlement crossed that this process has not claimed yet this period."""
        hit = crossed(levels, self.alert_thresholds, before, after)
        if not hit:
            return []
        period = period_id(scope.limits.budget_period, now)
        known = self._claimed.get(scope.ident)
        if known is None or known[0] != period:
            known = self._claimed[scope.ident] = (period, set())
        fresh = [pct for pct in hit if pct not in known[1]]
        known[1].update(fresh)
        return [BudgetCrossing(scope, period, pct, after, now) for pct in fresh]

    async def counts(self, scope: LimitScope) -> ScopeCounts:
        with self._lock:
            return self.ledger.counts(scope, self._clock())

    async def aclose(self) -> None:
        return None


def _hand_over(on_crossing: OnCrossing | None, crossing: BudgetCrossing) -> None:
    if on_crossing is None:
        return
    try:
        on_crossing(crossing)
    except Exception:  # an alert must never fail the settlement that crossed it
        logger.exception("limits: a budget alert could not be handed over")


async def _spend_since(source: SpendSource | None, scope: LimitScope, now: float) -> int | None:
    """The scope's spend this budget period from the database, or None when it could not be read in time."""
    if source is None:
        return None
    start, _ = period_bounds(scope.limits.budget_period, now)
    try:
        return await asyncio.wait_for(source(scope, start), _SEED_TIMEOUT_S)
    except Exception as exc:  # noqa: BLE001 - any database failure: the budget is kept safe by the caller
        logger.warning("limits: the spend of %s %r could not be read from the database (%s: %s)",
                       scope.kind, scope.name, type(exc).__name__, exc)
        return None


@dataclass(frozen=True, slots=True)
class _Fixed:
    """One key's script calls, encoded once for its scopes and budget periods: valid from ``since`` until
    ``until`` (the first end of one of its budget periods)."""

    scopes: tuple[LimitScope, ...]
    since: float
    until: float
    admit: ScriptCall
    settle: ScriptCall
    keys: tuple[str, ...]
    spend_until: tuple[int, ...]  # per scope: when its spend key may go (0: kept; -1: no budget)
    periods: tuple[str, ...]  # per scope: the budget period its spend key counts
    holds_slot: bool  # a scope limits concurrency: every answer returns a slot
    counts_tokens: bool  # a scope limits tokens per minute
    counts_spend: bool  # a scope has a budget

    def settles(self, admission: Admission, tokens: int, spend_nanos: int) -> bool:
        """Whether an answer changes anything in Redis: a slot or a reservation to return, tokens or spend to
        count (with only rpm there is no write at all)."""
        return (self.holds_slot or bool(admission.reservation.tokens or admission.reservation.nanos)
                or (tokens > 0 and self.counts_tokens) or (spend_nanos > 0 and self.counts_spend))


def _limit_arg(value: int | None) -> int:
    return -1 if value is None else value


class RedisLimitStore:
    """Limits counted in Redis, exact across processes and hosts; per process while Redis is away."""

    def __init__(
        self,
        url: str,
        *,
        prefix: str = DEFAULT_PREFIX,
        socket_timeout: float = 0.5,
        retry_after_s: float = 1.0,
        slot_lease_s: float = DEFAULT_SLOT_LEASE_S,
        fallback: ProcessLimitStore | None = None,
        clock: Callable[[], float] = time.time,
        spend_source: SpendSource | None = None,
        alert_thresholds: tuple[int, ...] = (),
        on_crossing: OnCrossing | None = None,
    ) -> None:
        self._client = RespClient(url, timeout=socket_timeout)
        self.prefix = prefix
        self._spend_source = spend_source
        self.alert_thresholds = alert_thresholds if on_crossing is not None else ()
        self._on_crossing = on_crossing
        # While Redis is away budgets are still seeded from the database, and alerts claimed in memory: an outage
        # resets neither (the audit trail's unique row keeps an alert claimed on both sides of it from firing twice).
        self.fallback = fallback or ProcessLimitStore(slot_lease_s=slot_lease_s, clock=clock, spend_source=spend_source,
                                                      alert_thresholds=alert_thresholds, on_crossing=on_crossing)
        self._lease_ms = int(slot_lease_s * 1000)
        self._window_ms = int(WINDOW_S * 1000)
        self._retry_after_s = retry_after_s
        self._clock = clock
        self._down_until: float | None = None  # None: Redis is believed reachable
        self._encoded: dict[int, _Fixed] = {}  # by id() of a key's scopes tuple (checked by identity)
        self._background: set[asyncio.Task[None]] = set()  # settlements waiting for a connection
        self._seeding: dict[str, asyncio.Future[None]] = {}  # spend keys being rebuilt from the database

    @property
    def shared(self) -> bool:
        """False from a failure until Redis answers again."""
        return self._down_until is None

    def _keys(self, scope: LimitScope, now: float) -> tuple[str, ...]:
        base = f"{self.prefix}{scope.ident}:"
        spend = f"{base}spend:{period_id(scope.limits.budget_period, now)}"
        return (base + "req", base + "tok", base + "slots", spend, base + "resv", base + "resvamt",
                base + "resvsum")

    def _fixed(self, scopes: tuple[LimitScope, ...], now: float) -> _Fixed:
        """The encoded calls for ``scopes`` now (the same object for a key's requests until one of its budget
        periods ends)."""
        fixed = self._encoded.get(id(scopes))
        if fixed is not None and fixed.scopes is scopes and fixed.since <= now < fixed.until:
            return fixed
        keys: list[str] = []
        admit_args: list[str | int] = ["admit", self._lease_ms, self._window_ms]
        thresholds = self.alert_thresholds
        settle_args: list[str | int] = ["settle", self._window_ms, len(thresholds), *thresholds]
        spend_until: list[int] = []
        periods: list[str] = []
        since, until = -math.inf, math.inf
        for scope in scopes:
            keys += self._keys(scope, now)
            limits = scope.limits
            budget = limits.budget_nanos
            admit_args += [_limit_arg(limits.rpm), _limit_arg(limits.tpm), _limit_arg(limits.max_concurrency),
                           -1 if budget is None else budget]
            start, end = period_bounds(limits.budget_period, now)
            keep = -1 if budget is None else 0 if end is None else int(end) + 86_400  # kept a day for the admin
            settle_args += [1 if limits.tpm is not None else 0, keep]
            settle_args += [-1] * len(thresholds) if budget is None else alert_levels(budget, thresholds)
            spend_until.append(keep)
            periods.append(period_id(limits.budget_period, now))
            since = max(since, start)
            until = min(until, math.inf if end is None else end)
        fixed = _Fixed(scopes, since, until, ScriptCall(LIMITS, keys, admit_args, per_call=3),
                       ScriptCall(LIMITS, keys, settle_args, per_call=3), tuple(keys), tuple(spend_until),
                       tuple(periods),
                       holds_slot=any(scope.limits.max_concurrency is not None for scope in scopes),
                       counts_tokens=any(scope.limits.tpm is not None for scope in scopes),
                       counts_spend=any(scope.limits.budget_usd is not None for scope in scopes))
        if len(self._encoded) >= _MAX_ENCODED:
            self._encoded.clear()
        self._encoded[id(scopes)] = fixed
        return fixed

    async def admit(self, scopes: tuple[LimitScope, ...], request_id: str,
                    reservation: Reservation = NO_RESERVATION) -> Admission:
        if self._skip_redis():
            return await self.fallback.admit(scopes, request_id, reservation)
        try:
            redis_now, decision, values = await self._admit_in_redis(scopes, request_id, reservation)
        except _UNAVAILABLE as exc:
            self._mark_down(exc)
            admission = await self.fallback.admit(scopes, request_id, reservation)
            # Whether the script ran before the failure is unknown; returning a slot that was never taken
            # is harmless.
            return dataclasses.replace(admission, maybe_in_redis=admission.verdict.admitted)
        self._mark_up()
        counted = decision == ADMITTED
        counts = tuple(counts_at(values, 2 + COUNTS_PER_SCOPE * i) for i in range(len(scopes)))
        verdict = verdict_of(scopes, counts, redis_now, reservation)
        if verdict.admitted != counted:
            # The script and decide() are written to agree (the store tests check it); should they not, the
            # script's decision stands, since it has already counted the request, or not.
            logger.error("the Redis limit script and the gateway disagree on %s", [s.ident for s in scopes])
            refusal = None if counted else Refusal(scopes[0], "rpm", 1.0)
            verdict = AdmissionVerdict(refusal, verdict.requests, verdict.tokens)
        return Admission(scopes, request_id, verdict, in_redis=True, reservation=reservation)

    async def _admit_in_redis(self, scopes: tuple[LimitScope, ...], request_id: str,
                              reservation: Reservation) -> tuple[float, int, list[int]]:
        """The script's reply; a budget whose spend key is missing is rebuilt from the database first (at most
        once per scope and request)."""
        for _ in range(len(scopes) + 1):
            fixed = self._fixed(scopes, self._clock())
            reply = admit_reply(await self._client.run_call(fixed.admit, request_id, reservation.tokens,
                                                            reservation.nanos))
            if reply[1] != SPEND_MISSING:
                return reply
            await self._seed(fixed, scopes, reply[2][2])
        raise RedisReplyError("the spend keys kept disappearing while they were rebuilt")

    async def _seed(self, fixed: _Fixed, scopes: tuple[LimitScope, ...], index: int) -> None:
        """Rebuild scope ``index``'s missing spend key from the database; requests that find it missing at the
        same time wait for one read."""
        spend_key = fixed.keys[index * KEYS_PER_SCOPE + 3]
        pending = self._seeding.get(spend_key)
        if pending is not None:
            await asyncio.shield(pending)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._seeding[spend_key] = future
        try:
            scope = scopes[index]
            spent = 0  # without an audit trail to read (the audit app is not installed) nothing was recorded
            if self._spend_source is not None:
                found = await _spend_since(self._spend_source, scope, self._clock())
                if found is None:
                    raise SpendUnavailable(scope)
                spent = found
            await self._client.run_script(LIMITS, list(fixed.keys), ["seed", index, spent, fixed.spend_until[index]])
        finally:
            del self._seeding[spend_key]
            future.set_result(None)

    def settle(self, admission: Admission, *, tokens: int, spend_nanos: int) -> bool:
        if not admission.in_redis:
            self.fallback.settle(admission, tokens=tokens, spend_nanos=spend_nanos)
            if admission.maybe_in_redis and not self._skip_redis():
                return self._settle_in_redis(admission, 0, 0)  # only the slot, if it was taken
            return False
        return self._settle_in_redis(admission, tokens, spend_nanos)

    def _settle_in_redis(self, admission: Admission, tokens: int, spend_nanos: int) -> bool:
        """Write the settlement to Redis now, or queue it for this turn's write (True), or send it as soon as a
        connection is open; its answer is handled when it comes (``_settled``)."""
        fixed = self._fixed(admission.scopes, self._clock())
        if not fixed.settles(admission, tokens, spend_nanos):
            return False
        args = (admission.request_id, tokens, spend_nanos)
        sent = self._client.send_call(fixed.settle, args,
                                      functools.partial(self._settled, fixed, admission, tokens, spend_nanos))
        if sent is Sent.NOT_SENT:
            self._in_background(self._settle_when_connected(fixed, admission, tokens, spend_nanos))
        return sent is Sent.QUEUED

    def _settled(self, fixed: _Fixed, admission: Admission, tokens: int, spend_nanos: int, reply: object) -> None:
        if isinstance(reply, RedisUnavailable) and reply.dropped:
            # The connection went before the answer (Redis restarted, or closed an idle connection): sent again
            # on a new one, as the client does for a command it waits for.
            self._in_background(self._settle_when_connected(fixed, admission, tokens, spend_nanos))
        elif isinstance(reply, _UNAVAILABLE):
            self._settle_failed(reply, admission, tokens, spend_nanos)
        else:
            self._mark_up()
            self._claimed(fixed, reply)

    async def _settle_when_connected(self, fixed: _Fixed, admission: Admission, tokens: int,
                                     spend_nanos: int) -> None:
        try:
            reply = await self._client.run_call(fixed.settle, admission.request_id, tokens, spend_nanos)
        except _UNAVAILABLE as exc:
            self._settle_failed(exc, admission, tokens, spend_nanos)
            return
        self._mark_up()
        self._claimed(fixed, reply)

    def _claimed(self, fixed: _Fixed, reply: object) -> None:
        """Hand over the thresholds the settlement's script claimed (none, mostly: its reply is then 1)."""
        claims = claimed_thresholds(reply)
        if not claims or self._on_crossing is None:
            return
        now = self._clock()
        for index, percent, after in claims:
            _hand_over(self._on_crossing, BudgetCrossing(fixed.scopes[index], fixed.periods[index], percent, after,
                                                         now))

    def _settle_failed(self, exc: BaseException, admission: Admission, tokens: int, spend_nanos: int) -> None:
        # The slot lapses in Redis after its lease; the tokens and spend are counted here meanwhile.
        self._mark_down(exc)
        if admission.in_redis:
            self.fallback.settle(admission, tokens=tokens, spend_nanos=spend_nanos)

    def _in_background(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._background.add(task)  # the loop keeps only weak references to tasks
        task.add_done_callback(self._background.discard)

    async def counts(self, scope: LimitScope) -> ScopeCounts:
        if self._skip_redis():
            return await self.fallback.counts(scope)
        try:
            reply = await self._client.run_script(COUNTS, list(self._keys(scope, self._clock())), [self._window_ms])
        except _UNAVAILABLE as exc:
            self._mark_down(exc)
            return await self.fallback.counts(scope)
        self._mark_up()
        return counts_at([int(value) for value in reply], 1)

    async def aclose(self) -> None:
        """Close the connection once the settlements already sent have their answers (each waits at most the
        socket timeout), so that none is lost at a stop."""
        await self._client.drain()
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)
        await self._client.aclose()

    def _skip_redis(self) -> bool:
        return self._down_until is not None and self._clock() < self._down_until

    def _mark_down(self, exc: BaseException) -> None:
        if self._down_until is None:
            logger.warning(
                "LIMITS DEGRADED: Redis is unreachable (%s: %s); rate limits, budgets and concurrency are counted "
                "per process until it answers again (asked again every %gs)",
                type(exc).__name__, exc, self._retry_after_s,
            )
        self._down_until = self._clock() + self._retry_after_s

    def _mark_up(self) -> None:
        if self._down_until is not None:
            self._down_until = None
            logger.warning("limits: Redis answers again; limits are shared by every process once more")


def make_limit_store(redis_url: str | None, *, prefix: str = DEFAULT_PREFIX,
                     spend_source: SpendSource | None = None, alert_thresholds: tuple[int, ...] = (),
                     on_crossing: OnCrossing | None = None) -> LimitStore:
    """Counts in Redis when ``redis_url`` is set (shared by every process), else in this process; budgets are
    seeded from ``spend_source`` (the database) in both, and budget alert thresholds claimed by either."""
    if redis_url:
        return RedisLimitStore(redis_url, prefix=prefix, spend_source=spend_source,
                               alert_thresholds=alert_thresholds, on_crossing=on_crossing)
    return ProcessLimitStore(spend_source=spend_source, alert_thresholds=alert_thresholds, on_crossing=on_crossing)
