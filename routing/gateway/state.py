"""The per-process state the request path reads and updates: health, pins, round-robin positions, budgets,
provider-limit counts.

Everything here is in memory and bounded. With ``REDIS_URL`` set, session pins go to Redis (every worker and
replica agrees on them), a model's provider rpm/tpm is decided in Redis for each attempt to it
(``routing.clients.provider_quota_store``, one round trip, only for models that carry such a limit), and a
background task (``routing.gateway.background.shared_sync``) shares cooldowns, lockouts and open breakers with every
other process within a poll; latency estimates stay per process. The request path never waits for Redis for health.
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass, field, fields

from django.conf import settings

from routing.clients.limit_store import LimitStore, make_limit_store
from routing.clients.pin_store import PinStore, make_pin_store
from routing.clients.provider_quota_store import ProviderQuotaStore
from routing.clients.shared_state_store import DEFAULT_PREFIX, SharedStateStore
from routing.core.health import HealthConfig, HealthRegistry
from routing.core.lockouts import LockoutSuspicions
from routing.core.probes import LastProbe
from routing.core.provider_limits import ProviderLimits, QuotaRegistry
from routing.core.retry import RetryBudget, RetryPolicy
from routing.core.selector import RoundRobinState, SelectorConfig
from routing.core.sessions import TtlLruStore
from routing.core.table import RoutingTable
from routing.gateway.background.shared_sync import SharedSync
from routing.gateway.spend_history import spend_source
from routing.ops import metrics
from routing.ops.budget_alerts import BudgetAlerts

MAX_WARM_SESSIONS = 100_000


@dataclass
class GatewayState:
    health: HealthRegistry = field(default_factory=HealthRegistry)
    round_robin: dict[str, RoundRobinState] = field(default_factory=dict)
    warm: TtlLruStore[str, str] = field(default_factory=lambda: TtlLruStore(MAX_WARM_SESSIONS))
    retry_budget: RetryBudget = field(default_factory=lambda: RetryBudget(ratio=settings.GOMODEL_RETRY_BUDGET))
    rng: random.Random = field(default_factory=random.Random)
    selector_config: SelectorConfig = field(default_factory=SelectorConfig)
    retry_policy: RetryPolicy = field(default_factory=lambda: RetryPolicy(
        max_attempts_total=settings.GOMODEL_MAX_ATTEMPTS,
        max_fallbacks=settings.GOMODEL_MAX_FALLBACKS,
        same_route_retries=settings.GOMODEL_SAME_ROUTE_RETRIES,
    ))
    _pins: PinStore | None = None
    _limits: LimitStore | None = None
    budget_alerts: BudgetAlerts = field(default_factory=BudgetAlerts)  # where the limit store's crossings go
    _provider_quotas: ProviderQuotaStore | None = None
    _key_turn: dict[str, int] = field(default_factory=dict)
    applied_version: int = -1
    quotas: QuotaRegistry = field(default_factory=QuotaRegistry)  # provider rpm/tpm per target
    shared: SharedSync | None = None  # the shared health task, when REDIS_URL is set
    _models: frozenset[str] = frozenset()  # the concrete models of the table followed
    # The last background probe of each target (routing.gateway.background.prober), this process's or, with REDIS_URL,
    # the prober's of the cluster: for the admin's live state.
    probes: dict[str, LastProbe] = field(default_factory=dict)
    # A live attempt's 401/403/404 avoided by the gateway key that saw it until it is confirmed
    # (routing.core.lockouts), and the confirmation probes in flight by target (routing.gateway.background.prober).
    lockouts: LockoutSuspicions = field(default_factory=LockoutSuspicions)
    confirming: dict[str, asyncio.Task[None]] = field(default_factory=dict)

    @property
    def pins(self) -> PinStore:
        if self._pins is None:
            self._pins = make_pin_store(settings.REDIS_URL or None)
        return self._pins

    @property
    def limits(self) -> LimitStore:
        """Where per-key and per-team limits are counted: Redis when ``REDIS_URL`` is set, else this process."""
        if self._limits is None:
            self._limits = make_limit_store(settings.REDIS_URL or None, prefix=settings.GOMODEL_LIMIT_KEY_PREFIX,
                                            spend_source=spend_source(),
                                            alert_thresholds=settings.GOMODEL_BUDGET_ALERT_THRESHOLDS,
                                            on_crossing=self.budget_alerts.crossed)
        return self._limits

    @property
    def provider_quotas(self) -> ProviderQuotaStore:
        """Where each attempt to a model with a provider rpm/tpm is admitted: Redis when ``REDIS_URL`` is set (exact
        across processes), else (and while Redis is away) this process's ``quotas``."""
        if self._provider_quotas is None:
            self._provider_quotas = ProviderQuotaStore(self.quotas, settings.REDIS_URL or None,
                                                       on_outage=metrics.SHARED_STATE_OUTAGES.inc)
        return self._provider_quotas

    @property
    def limits_in_redis_configured(self) -> bool:
        return bool(settings.REDIS_URL)

    def rr_state(self, virtual_model: str) -> RoundRobinState:
        state = self.round_robin.get(virtual_model)
        if state is None:
            state = self.round_robin[virtual_model] = RoundRobinState()
        return state

    def next_key_index(self, provider: str, count: int) -> int:
        """Several keys of one provider are used in turn."""
        turn = self._key_turn.get(provider, 0)
        self._key_turn[provider] = turn + 1
        return turn % count

    def follow(self, table: RoutingTable) -> None:
        """Catch up with a new routing table; called on the event loop by each request (an int compare)."""
        if table.version != self.applied_version:
            self.apply_table(table)
            self.applied_version = table.version

    def apply_table(self, table: RoutingTable) -> None:
        """Follow a configuration change: new health and selector settings and provider limits, forget removed
        targets; start sharing health when ``REDIS_URL`` is set (on an event loop)."""
        self.health.configure(HealthConfig.from_settings(table.settings))
        self.selector_config = SelectorConfig.from_settings(table.settings)
        names = set(table.models) | set(table.virtual_models)
        self.health.retain(names)
        self.lockouts.ttl_s = table.settings.cooldown_max_s  # a key avoids a target as long as a lockout would last
        self.lockouts.retain(table.models)
        self._models = frozenset(table.models)
        self.quotas.configure({m.name: ProviderLimits(m.rpm, m.tpm) for m in table.models.values() if m.rpm or m.tpm})
        if self._provider_quotas is not None:
            self._provider_quotas.forget(self.known_model)
        for gone in set(self.round_robin) - set(table.virtual_models):
            del self.round_robin[gone]
        for gone in set(self.probes) - set(table.models):
            del self.probes[gone]
        if settings.REDIS_URL:
            self.start_sharing(settings.REDIS_URL)

    def start_sharing(self, redis_url: str, *, prefix: str = DEFAULT_PREFIX) -> SharedSync | None:
        """Share health through Redis from now on (idempotent).

        Needs a running event loop (the lifespan startup, or the first request's ``follow``); without one it
        does nothing and returns None, and the next call on the loop starts it.
        """
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return None
        if self.shared is None:
            store = SharedStateStore(redis_url, prefix=prefix)
            self.shared = SharedSync(store, self.health, known=self.known_model, probes=self.probes)
        self.shared.start()
        return self.shared

    def known_model(self, name: str) -> bool:
        """Whether ``name`` is a concrete model of the routing table followed (shared verdicts name others too)."""
        return name in self._models

    async def close_limits(self) -> None:
        """Close the limit store and the provider-quota store (the lifespan shutdown), once the settlements already
        sent to Redis are applied: a settlement is never waited for on the request path."""
        limits, self._limits = self._limits, None
        if limits is not None:
            await limits.aclose()
        provider_quotas, self._provider_quotas = self._provider_quotas, None
        if provider_quotas is not None:
            await provider_quotas.aclose()

    async def stop_sharing(self) -> None:
        """Stop the shared health task and close its connection (the lifespan shutdown)."""
        shared, self.shared = self.shared, None
        if shared is not None:
            await shared.stop()

    def reset(self) -> None:
        """Forget everything learned (tests, and the admin's reset action)."""
        self.health.reset()
        self.lockouts.reset()
        self.quotas.reset()
        self.probes.clear()
        self.round_robin.clear()
        self.warm = TtlLruStore(MAX_WARM_SESSIONS)
        self.retry_budget = RetryBudget(ratio=settings.GOMODEL_RETRY_BUDGET)

    def renew(self) -> None:
        """Become what a newly started process has: nothing learned or pinned, settings read again.

        The request path's modules all hold this one object (``from routing.gateway.state import state``),
        so it is renewed in place rather than replaced; in-process tests start each case from here. Unlike
        ``reset`` it also drops the pin store, key turns, the table version followed and the random
        generator. An open Redis pin store (or limit store, or provider-quota store) is the caller's to close first
        (``await state.pins.aclose()``, ``await state.close_limits()``).
        """
        fresh = GatewayState()
        for spec in fields(GatewayState):
            setattr(self, spec.name, getattr(fresh, spec.name))


state = GatewayState()


def now() -> float:
    return time.monotonic()
