"""The background prober: brings cooling and locked-out targets back without waiting for live traffic.

A task on the worker's event loop (started by the ASGI lifespan, never on a request's path) wakes every
``PRO_ROUTING_PROBE_INTERVAL`` and probes the targets ``routing.core.probes.plan_probes`` names: those cooling
for 5xx or network failures, and those locked out for 401/403/404. A passing probe ends the cooldown early; a
lockout ends only when the probe passes with the provider's current key (every configured key of it, from the
routing table in force, so a key fixed in the admin, the config file or the environment of a new process ends
it); a 429's breaker is never probed.

One prober per process, or with ``REDIS_URL`` one per cluster: the process that holds the Redis lease
(``routing.clients.probe_lease``) probes; it renews the lease on every wake-up and another process takes over
within a lease (at most 15 s) when it stops. The others still see every verdict
(``routing.gateway.background.shared_sync`` carries the early close and each probe's result). While Redis is
unreachable every process probes its own targets, as it then keeps its own health.

Each probe is counted (``gomodel_probes_total{target,result}``), shown in the admin's live state (last probe
time and result), priced when it is a completion (``gomodel_cost_usd_total`` by target,
``gomodel_spend_usd_total`` and ``gomodel_tokens_total`` under the key label ``(probe)``), and audited when it
changed a target's state (or cost something): an audit revision with the endpoint ``probe``.

``confirm_soon`` sends one more kind of probe, outside the rounds and in the process that needs it (lease or
not): the immediate probe with the gateway's own credentials that confirms or dismisses a 401/403/404 one gateway
key saw (``routing.core.lockouts``). At most one per target at a time and per ``probe_spacing_s``, at most
``MAX_CONFIRMATIONS`` at once, none for a provider whose ``probe`` is ``off`` (a second key's sighting confirms
there). It is priced, shown and audited like the others, but neither counted in ``gomodel_probes_total`` (the
rounds' count) nor reported to the other processes: they hear only the lockout it confirms.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from routing.clients import gcp_tokens
from routing.clients.gcp_tokens import GOOGLE_TOKEN_KINDS
from routing.clients.probe_lease import ProbeLease
from routing.clients.redis_client import RedisReplyError, RedisUnavailable
from routing.clients.shared_state_store import DEFAULT_PREFIX
from routing.config.runtime import current_table
from routing.core.answer import Usage
from routing.core.outcome import AttemptOutcome, ErrorClass
from routing.core.probes import (
    LastProbe,
    ProbeCandidate,
    ProbeEffect,
    ProbeReported,
    ProbeTask,
    apply_confirmation,
    apply_probe,
    lease_timing,
    plan_probes,
    probe_mode,
    result_word,
)
from routing.core.table import RoutingTable
from routing.gateway import audit_handoff
from routing.gateway.background.probe_calls import ProbeCall, send_probe
from routing.gateway.background.shared_sync import process_origin
from routing.gateway.records import usage_dict
from routing.gateway.state import GatewayState
from routing.ops import metrics

log = logging.getLogger("gomodel.probes")

_REDIS_DOWN = (RedisUnavailable, RedisReplyError, OSError)
MAX_CONCURRENT_PROBES = 4
MAX_CONFIRMATIONS = 8  # confirmation probes in flight at once in one process
IDLE_RECHECK_S = 1.0  # probes switched off (interval 0): how often the setting is read again
PROBE_KEY_LABEL = "(probe)"  # the key label of probes in the spend and token metrics (no gateway key sent them)

_EFFECT_TEXT = {
    "closed": "the cooldown ended early",
    "extended": "the cooldown was extended",
    "unchanged": "no state change",
    "confirmed": "the lockout now holds for every key",
    "dismissed": "the key that saw the lockout no longer avoids the target",
}


# What a probe was, for its audit message, by its reason; {mode} is the call it made.
_PROBE_TEXT = {
    "transient": "background probe ({mode}) of a target cooling",
    "lockout": "background probe ({mode}) of a target locked out",
    "confirm": "probe ({mode}) with the gateway's credentials of a 401/403/404 one key saw",
}


@dataclass(frozen=True, slots=True)
class ProbeRecord:
    """One probe of a round, as the prober accounted it."""

    task: ProbeTask
    call: ProbeCall
    effect: ProbeEffect


class Prober:
    """The probing task of one process. ``run_round`` is one wake-up's work, callable on its own in tests."""

    def __init__(self, state: GatewayState, *, table: Callable[[], RoutingTable] = current_table,
                 lease: ProbeLease | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.state = state
        self._table = table
        self.lease = lease
        self._clock = clock
        self._task: asyncio.Task[None] | None = None
        self.active = False  # this process probes: it holds the lease, or probes alone
        self._lease_down = False

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def start(self) -> None:
        """Start probing on the running event loop (idempotent)."""
        if not self.running:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="gomodel-prober")

    async def stop(self) -> None:
        """Stop probing and hand the lease over at once (another process takes it at its next wake-up)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._set_active(False)
        if self.lease is not None:
            with contextlib.suppress(*_REDIS_DOWN):
                await self.lease.release()
            await self.lease.aclose()

    async def _run(self) -> None:
        next_round = 0.0
        while True:
            interval = self._table().settings.probe_interval_s
            if interval <= 0:
                await self._give_up_lease()
                await asyncio.sleep(IDLE_RECHECK_S)
                continue
            tick, ttl = lease_timing(interval)
            try:
                if await self._may_probe(ttl) and self._clock() >= next_round:
                    next_round = self._clock() + interval
                    await self.run_round()
            except asyncio.CancelledError:
                raise
            except Exception:  # the task must outlive a bug in one round; log.exception says so loudly
                log.exception("background probes: a round failed unexpectedly")
            await asyncio.sleep(tick)

    async def _may_probe(self, ttl_s: float) -> bool:
        """Whether this process probes now: alone, or holding the cluster's lease (or Redis is unreachable)."""
        if self.lease is None:
            self._set_active(True)
            return True
        try:
            held = await self.lease.hold(ttl_s)
        except _REDIS_DOWN as exc:
            if not self._lease_down:
                log.warning("background probes: Redis unreachable (%s); this process probes its own targets until "
                            "it answers", type(exc).__name__)
            self._lease_down = True
            self._set_active(True)
            return True
        if self._lease_down:
            log.warning("background probes: Redis reachable again; one process of the cluster probes")
            self._lease_down = False
        self._set_active(held)
        return held

    async def _give_up_lease(self) -> None:
        if self.active and self.lease is not None:
            with contextlib.suppress(*_REDIS_DOWN):
                await self.lease.release()
        self._set_active(False)

    def _set_active(self, active: bool) -> None:
        if active != self.active:
            self.active = active
            metrics.PROBER_ACTIVE.set(1 if active else 0)
            log.info("background probes: this process %s", "probes" if active else "does not probe")

    # -- one round -----------------------------------------------------------------------------------------

    async def run_round(self) -> list[ProbeRecord]:
        """Probe every target that wants a probe now, a few at a time; their results applied and accounted."""
        table = self._table()
        candidates = []
        for model in table.models.values():
            provider = table.providers.get(model.provider)
            if model.enabled and provider is not None:
                candidates.append(ProbeCandidate(model.name, provider.name, probe_mode(provider.kind,
                                                                                      provider.probe)))
        tasks = plan_probes(candidates, self.state.health.peek, self._clock())
        if not tasks:
            return []
        slots = asyncio.Semaphore(MAX_CONCURRENT_PROBES)

        async def one(task: ProbeTask) -> ProbeRecord | None:
            async with slots:
                return await self._probe(table, task)

        done = await asyncio.gather(*(one(task) for task in tasks))
        return [record for record in done if record is not None]

    async def _probe(self, table: RoutingTable, task: ProbeTask) -> ProbeRecord | None:
        started, started_unix = self._clock(), time.time()
        call = await _send(self.state, table, task)
        health = self.state.health.peek(task.target)
        if health is None:  # the target left the routing table while the probe was out
            return None
        effect = apply_probe(health, call.outcome, started, self._clock())
        record = ProbeRecord(task, call, effect)
        _account(self.state, table, record, started_unix)
        return record


async def _send(gateway: GatewayState, table: RoutingTable, task: ProbeTask) -> ProbeCall:
    """The probe's call with the provider's keys from ``table``: every key for a lockout (or its confirmation),
    the next key in turn otherwise."""
    provider, model = table.providers[task.provider], table.models[task.target]
    keys, problems = provider.api_keys, provider.key_problems
    if provider.kind in GOOGLE_TOKEN_KINDS:  # Vertex AI: the key is the provider's current access token
        keys, problems = await gcp_tokens.access_keys(provider)
    if not keys and problems:
        # Keys are configured but none resolves (docs/providers.md): nothing is sent, and the lockout stays. A
        # provider configured without a key (a local server; Bedrock signing with AWS credentials, which
        # send_probe does) is probed without one, as its requests are sent.
        return ProbeCall(AttemptOutcome.failure(ErrorClass.INCOMPATIBLE, "key_unavailable"), task.mode)
    if task.reason in ("lockout", "confirm"):
        # A lockout is the key's verdict: every key the provider's attempts use must pass.
        return await _each_key(table, task, [k.reveal() for k in keys] or [""])
    key = keys[gateway.next_key_index(provider.name, len(keys))].reveal() if keys else ""
    return await send_probe(provider, model, task.mode, key)


async def _each_key(table: RoutingTable, task: ProbeTask, provider_keys: list[str]) -> ProbeCall:
    """Probe with each key in turn until one fails: that failure, or the last success, with the usage and
    cost of every call summed."""
    provider, model = table.providers[task.provider], table.models[task.target]
    calls: list[ProbeCall] = []
    for key in provider_keys:
        calls.append(await send_probe(provider, model, task.mode, key))
        if not calls[-1].outcome.ok:
            break
    last = calls[-1]
    usages = [c.usage for c in calls if c.usage is not None]
    costs = [c.cost for c in calls if c.cost is not None]
    usage = Usage(input_tokens=sum(u.input_tokens for u in usages),
                  output_tokens=sum(u.output_tokens for u in usages),
                  cached_input_tokens=sum(u.cached_input_tokens for u in usages),
                  reasoning_tokens=sum(u.reasoning_tokens for u in usages)) if usages else None
    return ProbeCall(last.outcome, last.mode, usage, sum(costs) if costs else None)


def confirm_soon(gateway: GatewayState, table: RoutingTable, target: str) -> bool:
    """Start the probe that confirms or dismisses a 401/403/404 one gateway key saw at ``target``, on the running
    event loop; False when none is started (see the module docstring for when)."""
    model = table.models.get(target)
    provider = table.providers.get(model.provider) if model is not None else None
    if model is None or provider is None or probe_mode(provider.kind, provider.probe) == "off":
        return False
    if target in gateway.confirming or len(gateway.confirming) >= MAX_CONFIRMATIONS:
        return False
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return False
    if not gateway.lockouts.wants_probe(target, time.monotonic()):
        return False
    task = loop.create_task(_confirm(gateway, table, target), name="gomodel-confirm-lockout")
    gateway.confirming[target] = task
    task.add_done_callback(lambda _done: gateway.confirming.pop(target, None))
    return True


async def _confirm(gateway: GatewayState, table: RoutingTable, target: str) -> None:
    try:
        await confirm_lockout(gateway, table, target)
    except Exception:  # a confirmation is never worth a crash; the key that saw the lockout keeps avoiding it
        log.exception("could not confirm the lockout one key saw at %s", target)


async def confirm_lockout(gateway: GatewayState, table: RoutingTable, target: str) -> ProbeRecord:
    """Probe ``target`` with the gateway's own credentials now and apply what it proves to the lockout a key saw
    (``routing.core.probes.apply_confirmation``); the record as accounted."""
    model = table.models[target]
    provider = table.providers[model.provider]
    task = ProbeTask(target, provider.name, probe_mode(provider.kind, provider.probe), "confirm")
    started_unix = time.time()
    call = await _send(gateway, table, task)
    effect = apply_confirmation(gateway.health.get(target), gateway.lockouts, call.outcome, time.monotonic())
    record = ProbeRecord(task, call, effect)
    _account(gateway, table, record, started_unix)
    return record


def _account(gateway: GatewayState, table: RoutingTable, record: ProbeRecord, started_unix: float) -> None:
    task, call, effect = record.task, record.call, record.effect
    result = result_word(call.outcome)
    confirmation = task.reason == "confirm"
    if not confirmation:  # the rounds' count; a confirmation is the request path's, not a round's
        metrics.PROBES.labels(task.target, result).inc()
    usage = call.usage
    if call.cost:
        metrics.COST.labels(task.target).inc(call.cost)
        metrics.SPEND.labels(PROBE_KEY_LABEL, "").inc(call.cost)
    if usage is not None:
        if usage.input_tokens:
            metrics.TOKENS.labels(PROBE_KEY_LABEL, "", "input").inc(usage.input_tokens)
        if usage.output_tokens:
            metrics.TOKENS.labels(PROBE_KEY_LABEL, "", "output").inc(usage.output_tokens)
    gateway.probes[task.target] = LastProbe(time.time(), result, effect)
    shared = gateway.shared
    if shared is not None and not confirmation:  # the others hear a confirmation's lockout, not the probe
        shared.report_probe(ProbeReported(task.target, result, effect))
    billed = usage is not None and (usage.input_tokens or usage.output_tokens)
    if effect != "unchanged":
        log.info("background probe of %s (%s, %s): %s; %s", task.target, call.mode, task.reason, result,
                 _EFFECT_TEXT[effect])
    if effect != "unchanged" or billed or call.cost:
        publish = audit_handoff.publish
        if publish is not None:
            try:
                publish(probe_event(table, record, started_unix))
            except Exception:  # the audit trail must never stop the prober; the publisher spools what it can
                log.exception("could not hand the audit event of a probe of %s to the publisher", task.target)


def probe_event(table: RoutingTable, record: ProbeRecord, started_unix: float) -> dict[str, Any]:
    """The audit event of a probe: a revision with the endpoint ``probe`` and its one attempt. Reason words and
    numbers only: nothing the provider said is kept, so no key it might echo can reach the audit."""
    task, call, effect = record.task, record.call, record.effect
    outcome = call.outcome
    request_id = f"probe-{uuid.uuid4().hex[:24]}"
    result = result_word(outcome)
    error_class = str(outcome.error_class) if outcome.error_class is not None else ""
    return {
        "request_id": request_id,
        "operation_id": request_id,
        "created_at": started_unix,
        "key_id": None,
        "key_name": "",
        "team": "",
        "endpoint": "probe",
        "requested_model": task.target,
        "stream": False,
        "target": task.target,
        "status": outcome.status if outcome.status is not None else (200 if outcome.ok else None),
        "error_class": error_class,
        "error_message": f"{_PROBE_TEXT[task.reason].format(mode=call.mode)}: {result}; {_EFFECT_TEXT[effect]}",
        "latency_ms": round(outcome.latency_s * 1000, 2),
        "usage": usage_dict(call.usage),
        "cost_usd": call.cost,
        "validation": "",
        "config_version": table.version,
        "attempts": [{
            "attempt_id": f"{request_id}-1",
            "seq": 1,
            "target": task.target,
            "provider": task.provider,
            "status": outcome.status,
            "error_class": error_class or None,
            "reason": outcome.reason,
            "latency_ms": round(outcome.latency_s * 1000, 2),
            "usage": usage_dict(call.usage),
            "cost_usd": call.cost,
            "action": f"probe:{effect}",
        }],
    }


_running: Prober | None = None


def start(state: GatewayState) -> Prober:
    """Start this process's prober (the ASGI lifespan's startup; idempotent). With REDIS_URL it competes for the
    cluster's lease under the shared health's key prefix."""
    global _running
    if _running is None:
        lease = None
        if settings.REDIS_URL:
            shared = state.shared
            origin = shared.origin if shared is not None else process_origin()
            prefix = shared.store.prefix if shared is not None else DEFAULT_PREFIX
            lease = ProbeLease(settings.REDIS_URL, origin, prefix=prefix)
        _running = Prober(state, lease=lease)
    _running.start()
    return _running


async def stop() -> None:
    """Stop this process's prober and release its lease (the ASGI lifespan's shutdown)."""
    global _running
    prober, _running = _running, None
    if prober is not None:
        await prober.stop()
