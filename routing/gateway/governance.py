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

Admission holds the request's reservation (``routing.core.reserve``): its input estimate plus ``max_tokens``
(``GOMODEL_LIMIT_DEFAULT_OUTPUT_TOKENS`` when absent) times ``n``, at the dearest price of the models the
requested name reaches. Settlement replaces it with what every attempt was billed; an attempt whose usage never
arrived (the client hung up while it ran, a stream cut before its usage) is settled at an estimate, marked on
its audit record. Requests that call no model (``explain``, ``count_tokens``, the ledger) count toward the key's
requests and concurrency only (``RequestCount``).
"""

from __future__ import annotations

import asyncio

from django.conf import settings

from routing.clients.limit_store import Admission, SpendUnavailable
from routing.core.answer import Usage
from routing.core.limits import NANOS_PER_USD, NO_RESERVATION, Reservation, rate_limit_headers, retry_after_header
from routing.core.outcome import EARLY_FAILURE_REASONS, ErrorClass
from routing.core.reserve import Price, output_allowance, reservation
from routing.core.table import KeySpec, RoutingTable
from routing.gateway.attempt import model_cost
from routing.gateway.gateway_error import GatewayError
from routing.gateway.records import Call, Journey
from routing.gateway.state import state
from routing.ops import metrics

_PRICES: dict[tuple[int, str], tuple[Price, ...]] = {}  # (table version, name) -> the prices it can reach
_MAX_PRICED_NAMES = 4096


def _prices(table: RoutingTable, name: str) -> tuple[Price, ...]:
    """The distinct prices of the models ``name`` can end up at, once per routing table version."""
    slot = (table.version, name)
    found = _PRICES.get(slot)
    if found is None:
        found = tuple({Price(m.input_price or 0.0, m.output_price or 0.0) for m in table.leaf_models(name)})
        if len(_PRICES) >= _MAX_PRICED_NAMES:
            _PRICES.clear()
        _PRICES[slot] = found
    return found


def request_reservation(call: Call, key: KeySpec) -> Reservation:
    """What this request may cost at most, on the dimensions the key's and team's limits count."""
    if not (key.reserves_tokens or key.reserves_money):
        return NO_RESERVATION
    features = call.features
    if call.endpoint == "embeddings":
        output = 0
    else:
        n = call.body.get("n")
        choices = n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else 1
        output = output_allowance(features.max_output_tokens, choices, settings.GOMODEL_LIMIT_DEFAULT_OUTPUT_TOKENS)
    prices = _prices(call.table, features.model) if key.reserves_money else ()
    return reservation(input_tokens=features.estimated_input_tokens, output_tokens=output, prices=prices,
                       tokens=key.reserves_tokens, money=key.reserves_money)


async def admit_limits(call: Call, journey: Journey) -> None:
    """Count this request against its key's and team's limits, holding its reservation, or raise the 429 of
    the first one it breaks."""
    key = call.key
    if key is None or not key.limit_scopes:
        return
    await _admit(call, journey, key, request_reservation(call, key))


class RequestCount:
    """A request that calls no model (``explain``, ``count_tokens``, the ledger) counted toward its key's and team's
    requests per minute and concurrency, never refused by or charged to their tokens or budget.

    ``async with RequestCount(key, id) as headers`` raises the 429 of a limit it breaks, gives the
    ``x-ratelimit-*`` headers for the answer, and returns the slot when the block ends, however it ends."""

    def __init__(self, key: KeySpec | None, request_id: str) -> None:
        self.key = key
        self.request_id = request_id
        self.admission: Admission | None = None

    async def __aenter__(self) -> dict[str, str]:
        key = self.key
        if key is None or not key.request_scopes:
            return {}
        store = state.limits
        admission = await store.admit(key.request_scopes, self.request_id, NO_RESERVATION)
        _count_store(admission.in_redis, store.shared)
        verdict = admission.verdict
        headers = rate_limit_headers(verdict.requests, verdict.tokens)
        refusal = verdict.refusal
        if refusal is not None:
            metrics.LIMIT_REJECTIONS.labels(key.name, key.team_name, refusal.limit).inc()
            raise GatewayError(429, refusal.message(), code=refusal.code,
                               headers={**headers, "Retry-After": retry_after_header(refusal.retry_after_s)},
                               error_class="limit_exceeded")
        self.admission = admission
        return headers

    async def __aexit__(self, *exc_info: object) -> None:
        admission, self.admission = self.admission, None
        if admission is not None and state.limits.settle(admission, tokens=0, spend_nanos=0):
            await asyncio.sleep(0)


async def _admit(call: Call, journey: Journey, key: KeySpec, reserved: Reservation) -> None:
    store = state.limits
    try:
        admission = await store.admit(key.limit_scopes, call.request_id, reserved)
    except SpendUnavailable as exc:
        journey.limit_refused = f"{exc.scope.kind}:budget"
        raise GatewayError(503, f"The budget of {exc.scope.kind} \"{exc.scope.name}\" cannot be checked right now: "
                           "its spend is neither in Redis nor readable from the database. Retry shortly.",
                           code="budget_unavailable", headers={"Retry-After": "5"},
                           error_class="transient") from None
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


def charge_abandoned(call: Call, journey: Journey) -> None:
    """Estimate the usage of every attempt that was sent and never answered: still running when its client hung
    up, or timed out. The provider goes on producing, and billing, an answer nobody reads, so such an attempt
    costs its input estimate and all the output it may produce; its record says its usage is estimated. Called
    once the request has ended, before its audit event is handed over (``responses.finish``)."""
    for record in journey.attempts:
        if record.usage is not None:
            continue
        outcome = record.outcome
        if outcome is not None and not (outcome.error_class == ErrorClass.AMBIGUOUS
                                        and outcome.reason not in EARLY_FAILURE_REASONS):
            continue
        model = call.table.models.get(record.target)
        if model is None:
            continue
        record.usage = Usage(call.features.estimated_input_tokens, _abandoned_output(call))
        record.cost = model_cost(model, record.usage)
        record.usage_estimated = journey.usage_estimated = True


def _billed(journey: Journey) -> tuple[int, int]:
    """Tokens and nano-dollars of every attempt whose usage is known or estimated (failed ones included)."""
    tokens = 0
    cost = 0.0
    for record in journey.attempts:
        if record.usage is not None:
            tokens += record.usage.total_tokens
        if record.cost:
            cost += record.cost
    return tokens, round(cost * NANOS_PER_USD)


def _abandoned_output(call: Call) -> int:
    """The output charged for an answer the gateway never saw: all it may have produced (its reservation's
    output). The provider was not told to stop, so nothing less can be known; a client that wants to pay less
    for a request it abandons sends a smaller ``max_tokens``."""
    if call.endpoint == "embeddings":
        return 0
    n = call.body.get("n")
    choices = n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else 1
    return output_allowance(call.features.max_output_tokens, choices, settings.GOMODEL_LIMIT_DEFAULT_OUTPUT_TOKENS)


def _take(call: Call, journey: Journey) -> tuple[int, int] | None:
    """The usage to settle, once: None when there is nothing (left) to settle."""
    if journey.limits is None or journey.limits_settled:
        return None
    journey.limits_settled = True
    return _billed(journey)


async def settle_limits(call: Call, journey: Journey) -> None:
    """Release the request's slot and count what it used; a second call does nothing. Redis is not waited for:
    a settlement queued behind other commands goes out with this turn's write, which one yield lets happen
    before the caller sends its answer."""
    if _settle(call, journey):
        await asyncio.sleep(0)


def settle_limits_soon(call: Call, journey: Journey) -> None:
    """``settle_limits`` for a request whose own task is being cancelled: nothing is awaited (its client is
    gone; the settlement goes out with the next write to Redis all the same)."""
    _settle(call, journey)


def _settle(call: Call, journey: Journey) -> bool:
    """Settle once; True when the settlement waits in the queue for this turn's write to Redis."""
    billed = _take(call, journey)
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
