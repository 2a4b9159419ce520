"""Per-key and per-team limits on the request path: admitted before routing, settled when the answer ends.

``admit_limits`` runs first in the engine for a key with limits (its own or its team's): one call to the
limit store (one Redis round trip when Redis is configured) checks every limit and either counts the
request or raises the 429. ``settle_limits`` runs exactly once when the answer has ended, whatever the path
(a JSON answer, an error, a stream read to the end or cut, a client that hung up): it releases the
concurrency slot and counts the tokens and spend every attempt of the request was billed for. It does not
wait for Redis: the settlement is written at once, or joins the write of the commands other requests queued in
this turn of the event loop, and then ``settle_limits`` yields once so that it has gone before the answer is
sent; its answer is handled when it comes. A request whose task is being cancelled settles the same way,
without the yield (``settle_limits_soon``).
A key without limits costs nothing here: its ``limit_scopes`` is empty.
"""

from __future__ import annotations

import asyncio

from routing.core.limits import NANOS_PER_USD, rate_limit_headers, retry_after_header
from routing.core.table import KeySpec
from routing.gateway.gateway_error import GatewayError
from routing.gateway.records import Call, Journey
from routing.gateway.state import state
from routing.ops import metrics


async def admit_limits(call: Call, journey: Journey) -> None:
    """Count this request against its key's and team's limits, or raise the 429 of the first one it breaks."""
    key = call.key
    if key is None or not key.limit_scopes:
        return
    store = state.limits
    admission = await store.admit(key.limit_scopes, call.request_id)
    _count_store(admission.in_redis, store.shared)
    verdict = admission.verdict
    journey.limit_headers = rate_limit_headers(verdict.requests, verdict.tokens)
    refusal = verdict.refusal
    if refusal is None:
        journey.limits = admission
        return
    metrics.LIMIT_REJECTIONS.labels(key.name, key.team_name, refusal.limit).inc()
    journey.limit_refused = f"{refusal.scope.kind}:{refusal.limit}"
    raise GatewayError(429, refusal.message(), code=refusal.code,
                       headers={"Retry-After": retry_after_header(refusal.retry_after_s)},
                       error_class="limit_exceeded")


def _count_store(in_redis: bool, shared: bool) -> None:
    if not in_redis and state.limits_in_redis_configured:
        metrics.LIMIT_STORE_FALLBACK.inc()
    metrics.LIMIT_STORE_REDIS.set(1 if in_redis and shared else 0)


def _billed(journey: Journey) -> tuple[int, int]:
    """Tokens and nano-dollars of every attempt whose usage the provider reported (failed ones included)."""
    tokens = 0
    cost = 0.0
    for record in journey.attempts:
        if record.usage is not None:
            tokens += record.usage.total_tokens
        if record.cost:
            cost += record.cost
    return tokens, round(cost * NANOS_PER_USD)


def _take(journey: Journey) -> tuple[int, int] | None:
    """The usage to settle, once: None when there is nothing (left) to settle."""
    if journey.limits is None or journey.limits_settled:
        return None
    journey.limits_settled = True
    return _billed(journey)


async def settle_limits(call: Call, journey: Journey) -> None:
    """Release the request's slot and count what it used; a second call does nothing. Redis is not waited for:
    a settlement queued behind other commands goes out with this turn's write, which one yield lets happen
    before the caller sends its answer."""
    if _settle(journey):
        await asyncio.sleep(0)


def settle_limits_soon(call: Call, journey: Journey) -> None:
    """``settle_limits`` for a request whose own task is being cancelled: nothing is awaited (its client is
    gone; the settlement goes out with the next write to Redis all the same)."""
    _settle(journey)


def _settle(journey: Journey) -> bool:
    """Settle once; True when the settlement waits in the queue for this turn's write to Redis."""
    billed = _take(journey)
    admission = journey.limits
    if billed is None or admission is None:
        return False
    tokens, nanos = billed
    return state.limits.settle(admission, tokens=tokens, spend_nanos=nanos)


def count_usage(key: KeySpec, journey: Journey) -> None:
    """Spend and tokens by key and team in Prometheus: every attempt the provider billed, limited key or not."""
    spend = 0.0
    tokens_in = tokens_out = 0
    for record in journey.attempts:
        if record.cost:
            spend += record.cost
        if record.usage is not None:
            tokens_in += record.usage.input_tokens
            tokens_out += record.usage.output_tokens
    team = key.team_name
    if spend:
        metrics.SPEND.labels(key.name, team).inc(spend)
    if tokens_in:
        metrics.TOKENS.labels(key.name, team, "input").inc(tokens_in)
    if tokens_out:
        metrics.TOKENS.labels(key.name, team, "output").inc(tokens_out)
