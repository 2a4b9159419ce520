"""Limit stores: where the counts behind per-key and per-team limits live.

Two implementations share one protocol:

* ``ProcessLimitStore`` counts in this process (``routing.core.limit_ledger``): the embedded default.
  With several worker processes or replicas each counts on its own, so a limit holds per process.
* ``RedisLimitStore`` counts in Redis, so the limits hold across every process and host. A request costs
  two round trips, each one Lua script (atomic in Redis): ``admit`` checks every limit of the key and its
  team and counts the request in all of them or none; ``settle`` releases the concurrency slot and adds
  the answer's tokens and spend. Windows run on Redis's clock (``TIME``), so replicas with skewed clocks
  still share one window.

When Redis cannot be reached (refused, no answer within ``socket_timeout``, an error reply), the request is
counted by an in-process ledger instead: a warning is logged once when Redis goes away and an info line
when it answers again, and Redis is asked again at most every ``retry_after_s``. A request is never failed
because Redis is away. An admission remembers where it was counted, and is settled there.

Keys (``prefix`` defaults to ``gomodel:limit:``): ``<prefix><scope>:req`` (sorted set of admission times),
``:tok`` and ``:toksum`` (token log and its running sum), ``:slots`` (request ids by lease end),
``:spend:<period>`` (nano-dollars).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from routing.clients.redis_client import Encoded, RedisReplyError, RedisUnavailable, RespClient, Script
from routing.core.limit_ledger import DEFAULT_SLOT_LEASE_S, LimitLedger, Verdict, verdict_of
from routing.core.limits import WINDOW_S, Limits, LimitScope, Refusal, ScopeCounts, period_bounds, period_id

logger = logging.getLogger("gomodel.limits")

DEFAULT_PREFIX = "gomodel:limit:"
_MAX_ENCODED = 10_000  # keys whose encoded script arguments are kept (cleared past it; rebuilt on use)
_UNAVAILABLE = (RedisUnavailable, RedisReplyError, OSError)


@dataclass(frozen=True, slots=True)
class Admission:
    """One request's admission: the verdict, and where it was counted (so it is settled there)."""

    scopes: tuple[LimitScope, ...]
    request_id: str
    verdict: Verdict
    in_redis: bool
    # Counted in this process after Redis did not answer in time: Redis may still have run the script and
    # taken a slot, which the settlement then also returns there.
    maybe_in_redis: bool = False


class LimitStore(Protocol):
    @property
    def shared(self) -> bool:
        """Whether the counts are shared by every process (Redis reachable), or this process's own."""
        ...

    async def admit(self, scopes: tuple[LimitScope, ...], request_id: str) -> Admission: ...

    async def settle(self, admission: Admission, *, tokens: int, spend_nanos: int) -> None: ...

    async def counts(self, scope: LimitScope) -> ScopeCounts:
        """A scope's counts now (the admin's view); does not change them."""
        ...

    async def aclose(self) -> None: ...


class ProcessLimitStore:
    """Limits counted in this process only."""

    def __init__(self, *, slot_lease_s: float = DEFAULT_SLOT_LEASE_S,
                 clock: Callable[[], float] = time.time) -> None:
        self.ledger = LimitLedger(slot_lease_s=slot_lease_s)
        self._clock = clock
        self._lock = threading.Lock()  # the admin reads from another thread

    @property
    def shared(self) -> bool:
        return False

    async def admit(self, scopes: tuple[LimitScope, ...], request_id: str) -> Admission:
        with self._lock:
            verdict = self.ledger.admit(scopes, request_id, self._clock())
        return Admission(scopes, request_id, verdict, in_redis=False)

    async def settle(self, admission: Admission, *, tokens: int, spend_nanos: int) -> None:
        with self._lock:
            self.ledger.settle(admission.scopes, admission.request_id, tokens=tokens, spend_nanos=spend_nanos,
                               now=self._clock())

    async def counts(self, scope: LimitScope) -> ScopeCounts:
        with self._lock:
            return self.ledger.counts(scope, self._clock())

    async def aclose(self) -> None:
        return None


# KEYS: five per scope (req, tok, toksum, slots, spend). ARGV: slot lease ms, window ms, then four per scope:
# rpm, tpm, max concurrency, budget in nano-dollars (-1: unlimited), and last the request id (the fixed
# arguments come first, so they are encoded once per key). Returns the Redis time in ms, 1 (admitted) or 0,
# then seven counts per scope taken before this request (see ScopeCounts; -1: none).
# The decision mirrors routing.core.limits.decide: refused when a count has reached its limit.
_ADMIT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lease, window, rid = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[#ARGV]
local cutoff = now - window
local out = {now, 1}
local ok = true
for i = 0, #KEYS / 5 - 1 do
  local k, a = i * 5, 2 + i * 4
  local rpm, tpm = tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
  local conc, budget = tonumber(ARGV[a + 3]), tonumber(ARGV[a + 4])
  local requests, oldest_req = 0, -1
  if rpm >= 0 then
    redis.call('ZREMRANGEBYSCORE', KEYS[k + 1], '-inf', cutoff)
    requests = redis.call('ZCARD', KEYS[k + 1])
    if requests > 0 then oldest_req = tonumber(redis.call('ZRANGE', KEYS[k + 1], 0, 0, 'WITHSCORES')[2]) end
    if requests >= rpm then ok = false end
  end
  local tokens, oldest_tok, tok_retry = 0, -1, -1
  if tpm >= 0 then
    local gone = redis.call('ZRANGEBYSCORE', KEYS[k + 2], '-inf', cutoff)
    if #gone > 0 then
      local sub = 0
      for _, member in ipairs(gone) do sub = sub + tonumber(string.match(member, ':(%d+)$')) end
      redis.call('ZREMRANGEBYSCORE', KEYS[k + 2], '-inf', cutoff)
      redis.call('DECRBY', KEYS[k + 3], sub)
    end
    local first = redis.call('ZRANGE', KEYS[k + 2], 0, 0, 'WITHSCORES')
    if #first > 0 then
      oldest_tok = tonumber(first[2])
      tokens = tonumber(redis.call('GET', KEYS[k + 3]) or '0')
    else
      redis.call('DEL', KEYS[k + 3])
    end
    if tokens >= tpm then
      ok = false
      local entries = redis.call('ZRANGE', KEYS[k + 2], 0, -1, 'WITHSCORES')
      local left = tokens
      for j = 1, #entries, 2 do
        left = left - tonumber(string.match(entries[j], ':(%d+)$'))
        if left < tpm then
          tok_retry = tonumber(entries[j + 1]) + window
          break
        end
      end
    end
  end
  local slots = 0
  if conc >= 0 then
    redis.call('ZREMRANGEBYSCORE', KEYS[k + 4], '-inf', now)
    slots = redis.call('ZCARD', KEYS[k + 4])
    if slots >= conc then ok = false end
  end
  local spend = 0
  if budget >= 0 then
    spend = tonumber(redis.call('GET', KEYS[k + 5]) or '0')
    if spend >= budget then ok = false end
  end
  for _, v in ipairs({requests, oldest_req, tokens, oldest_tok, tok_retry, slots, spend}) do out[#out + 1] = v end
end
if ok then
  for i = 0, #KEYS / 5 - 1 do
    local k, a = i * 5, 2 + i * 4
    if tonumber(ARGV[a + 1]) >= 0 then
      redis.call('ZADD', KEYS[k + 1], now, rid)
      redis.call('PEXPIRE', KEYS[k + 1], window)
    end
    if tonumber(ARGV[a + 3]) >= 0 then
      redis.call('ZADD', KEYS[k + 4], now + lease, rid)
      redis.call('PEXPIRE', KEYS[k + 4], lease)
    end
  end
else
  out[2] = 0
end
return out
"""

# KEYS: four per scope (tok, toksum, slots, spend). ARGV: window ms, then two per scope: 1 when it limits tokens
# (else 0), and the unix time its spend key may go (0: kept; -1: the scope has no budget, so its spend is not
# counted); last the request id, its tokens and its nano-dollars.
_SETTLE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local n = #ARGV
local window, rid, tokens, spend = tonumber(ARGV[1]), ARGV[n - 2], tonumber(ARGV[n - 1]), tonumber(ARGV[n])
for i = 0, #KEYS / 4 - 1 do
  local k, a = i * 4, 1 + i * 2
  redis.call('ZREM', KEYS[k + 3], rid)
  if tokens > 0 and ARGV[a + 1] == '1' then
    redis.call('ZADD', KEYS[k + 1], now, rid .. ':' .. tokens)
    redis.call('INCRBY', KEYS[k + 2], tokens)
    redis.call('PEXPIRE', KEYS[k + 1], window)
    redis.call('PEXPIRE', KEYS[k + 2], window)
  end
  local until_s = tonumber(ARGV[a + 2])
  if spend > 0 and until_s >= 0 then
    redis.call('INCRBY', KEYS[k + 4], spend)
    if until_s > 0 then redis.call('EXPIREAT', KEYS[k + 4], until_s) end
  end
end
return 1
"""

# KEYS: req, tok, toksum, slots, spend of one scope; ARGV: window ms. The same seven counts, read only.
_COUNTS = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local cutoff = now - tonumber(ARGV[1])
local requests = redis.call('ZCOUNT', KEYS[1], '(' .. cutoff, '+inf')
local first_req = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. cutoff, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
local entries = redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. cutoff, '+inf', 'WITHSCORES')
local tokens = 0
for j = 1, #entries, 2 do tokens = tokens + tonumber(string.match(entries[j], ':(%d+)$')) end
local slots = redis.call('ZCOUNT', KEYS[4], '(' .. now, '+inf')
return {now, requests, first_req[2] or -1, tokens, entries[2] or -1, -1, slots,
        tonumber(redis.call('GET', KEYS[5]) or '0')}
"""
_ADMIT_SCRIPT, _SETTLE_SCRIPT, _COUNTS_SCRIPT = Script(_ADMIT), Script(_SETTLE), Script(_COUNTS)


def _seconds(ms: int | str) -> float | None:
    value = int(ms)
    return None if value < 0 else value / 1000.0


def _counts_from(values: list[int | str]) -> ScopeCounts:
    """Seven numbers of a script's reply as ``ScopeCounts`` (times in seconds on Redis's clock)."""
    requests, oldest_req, tokens, oldest_tok, retry, slots, spend = values
    return ScopeCounts(requests=int(requests), oldest_request_s=_seconds(oldest_req), tokens=int(tokens),
                       oldest_tokens_s=_seconds(oldest_tok), tokens_retry_s=_seconds(retry),
                       slots=int(slots), spend_nanos=int(spend))


@dataclass(frozen=True, slots=True)
class _Fixed:
    """The keys and fixed arguments of one key's scripts, encoded once for its scopes and budget periods."""

    scopes: tuple[LimitScope, ...]
    periods: tuple[str, ...]
    admit: Encoded
    admit_keys: int
    settle: Encoded | None  # None: nothing to settle (requests per minute only)
    settle_keys: int


def _settles(limits: Limits) -> bool:
    """Whether an answer changes anything for these limits: a slot to return, tokens or spend to count."""
    return limits.tpm is not None or limits.max_concurrency is not None or limits.budget_usd is not None


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
    ) -> None:
        self._client = RespClient(url, timeout=socket_timeout)
        self.prefix = prefix
        self.fallback = fallback or ProcessLimitStore(slot_lease_s=slot_lease_s, clock=clock)
        self._lease_ms = int(slot_lease_s * 1000)
        self._window_ms = int(WINDOW_S * 1000)
        self._retry_after_s = retry_after_s
        self._clock = clock
        self._down_until: float | None = None  # None: Redis is believed reachable
        self._encoded: dict[int, _Fixed] = {}  # by id() of a key's scopes tuple (checked by identity)

    @property
    def shared(self) -> bool:
        """False from a failure until Redis answers again."""
        return self._down_until is None

    def _keys(self, scope: LimitScope, now: float) -> tuple[str, str, str, str, str]:
        base = f"{self.prefix}{scope.ident}:"
        spend = f"{base}spend:{period_id(scope.limits.budget_period, now)}"
        return base + "req", base + "tok", base + "toksum", base + "slots", spend

    def _fixed(self, scopes: tuple[LimitScope, ...], now: float) -> _Fixed:
        """The encoded keys and fixed arguments for ``scopes`` now (the same object for a key's requests until
        one of its budget periods ends)."""
        periods = tuple(period_id(scope.limits.budget_period, now) for scope in scopes)
        fixed = self._encoded.get(id(scopes))
        if fixed is not None and fixed.scopes is scopes and fixed.periods == periods:
            return fixed
        admit_keys: list[str] = []
        admit_args: list[str | int] = [self._lease_ms, self._window_ms]
        settle_keys: list[str] = []
        settle_args: list[str | int] = [self._window_ms]
        for scope in scopes:
            req, tok, toksum, slots, spend = self._keys(scope, now)
            admit_keys += [req, tok, toksum, slots, spend]
            settle_keys += [tok, toksum, slots, spend]
            limits = scope.limits
            budget = limits.budget_nanos
            admit_args += [_limit_arg(limits.rpm), _limit_arg(limits.tpm), _limit_arg(limits.max_concurrency),
                           -1 if budget is None else budget]
            _, end = period_bounds(limits.budget_period, now)
            until = -1 if budget is None else 0 if end is None else int(end) + 86_400  # kept a day for the admin
            settle_args += [1 if limits.tpm is not None else 0, until]
        settles = any(_settles(scope.limits) for scope in scopes)
        fixed = _Fixed(scopes, periods, Encoded(*admit_keys, *admit_args), len(admit_keys),
                       Encoded(*settle_keys, *settle_args) if settles else None, len(settle_keys))
        if len(self._encoded) >= _MAX_ENCODED:
            self._encoded.clear()
        self._encoded[id(scopes)] = fixed
        return fixed

    async def admit(self, scopes: tuple[LimitScope, ...], request_id: str) -> Admission:
        if self._skip_redis():
            return await self.fallback.admit(scopes, request_id)
        fixed = self._fixed(scopes, self._clock())
        try:
            reply = await self._client.run_encoded_script(_ADMIT_SCRIPT, fixed.admit_keys, fixed.admit, request_id)
        except _UNAVAILABLE as exc:
            self._mark_down(exc)
            admission = await self.fallback.admit(scopes, request_id)
            # Whether the script ran before the failure is unknown; returning a slot that was never taken
            # is harmless.
            return dataclasses.replace(admission, maybe_in_redis=admission.verdict.admitted)
        self._mark_up()
        redis_now = int(reply[0]) / 1000.0
        counts = tuple(_counts_from(reply[2 + 7 * i: 9 + 7 * i]) for i in range(len(scopes)))
        verdict = verdict_of(scopes, counts, redis_now)
        counted = reply[1] == 1
        if verdict.admitted != counted:
            # The script and decide() are written to agree (the store tests check it); should they not, the
            # script's decision stands, since it has already counted the request, or not.
            logger.error("the Redis limit script and the gateway disagree on %s", [s.ident for s in scopes])
            refusal = None if counted else Refusal(scopes[0], "rpm", 1.0)
            verdict = Verdict(refusal, verdict.requests, verdict.tokens)
        return Admission(scopes, request_id, verdict, in_redis=True)

    async def settle(self, admission: Admission, *, tokens: int, spend_nanos: int) -> None:
        if not admission.in_redis:
            await self.fallback.settle(admission, tokens=tokens, spend_nanos=spend_nanos)
            if admission.maybe_in_redis and not self._skip_redis():
                await self._settle_in_redis(admission, tokens=0, spend_nanos=0)  # only the slot, if it was taken
            return
        await self._settle_in_redis(admission, tokens=tokens, spend_nanos=spend_nanos)

    async def _settle_in_redis(self, admission: Admission, *, tokens: int, spend_nanos: int) -> None:
        fixed = self._fixed(admission.scopes, self._clock())
        if fixed.settle is None:
            return  # requests per minute only: counted at admission, nothing to settle (no round trip)
        try:
            await self._client.run_encoded_script(_SETTLE_SCRIPT, fixed.settle_keys, fixed.settle,
                                                  admission.request_id, tokens, spend_nanos)
        except _UNAVAILABLE as exc:
            # The slot lapses in Redis after its lease; the tokens and spend are counted here meanwhile.
            self._mark_down(exc)
            if admission.in_redis:
                await self.fallback.settle(admission, tokens=tokens, spend_nanos=spend_nanos)
            return
        self._mark_up()

    async def counts(self, scope: LimitScope) -> ScopeCounts:
        if self._skip_redis():
            return await self.fallback.counts(scope)
        try:
            reply = await self._client.run_script(_COUNTS_SCRIPT, list(self._keys(scope, self._clock())),
                                                  [self._window_ms])
        except _UNAVAILABLE as exc:
            self._mark_down(exc)
            return await self.fallback.counts(scope)
        self._mark_up()
        return _counts_from(reply[1:])

    async def aclose(self) -> None:
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


def make_limit_store(redis_url: str | None, *, prefix: str = DEFAULT_PREFIX) -> LimitStore:
    """Counts in Redis when ``redis_url`` is set (shared by every process), else in this process."""
    if redis_url:
        return RedisLimitStore(redis_url, prefix=prefix)
    return ProcessLimitStore()
