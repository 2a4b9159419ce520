"""The per-process runtime: compile the Django models into a RoutingTable and hot-swap it on change.

The request path calls ``current_table()``, which returns one reference and never touches the database.
A daemon thread polls the configuration version (one tiny query every GOMODEL_CONFIG_POLL_SECONDS) and,
when it moved, compiles a new table and swaps the reference. A request in flight keeps the table it
started with, so a change never fails it.
"""

from __future__ import annotations

import logging
import threading
from datetime import datetime
from decimal import Decimal
from typing import TypeVar

from django.conf import settings
from django.db import close_old_connections

from routing import models as m
from routing.clients import gcp_tokens
from routing.clients.egress import egress
from routing.config.provider_cloud import AWS_REFERENCE_FIELDS
from routing.config.provider_keys import look_up
from routing.core.cache import CacheSpec, SemanticSpec
from routing.core.categories import DEFAULT_LONG_CONTEXT_TOKENS, KEYWORD_CATEGORIES
from routing.core.limits import Limits
from routing.core.policies import PolicySpec
from routing.core.table import (
    CategoryRouteSpec,
    ContractSpec,
    KeySpec,
    ModelSpec,
    ProviderSpec,
    RoutingTable,
    Secret,
    SettingsInForce,
    TargetRef,
    TeamSpec,
    TierRouteSpec,
    VirtualModelSpec,
)

log = logging.getLogger("gomodel.runtime")

_T = TypeVar("_T")


def _float(value: Decimal | None) -> float | None:
    return None if value is None else float(value)


def _timestamp(value: datetime | None) -> float | None:
    return None if value is None else value.timestamp()


def compile_settings(row: m.RoutingSettings | None) -> SettingsInForce:
    """Environment values as defaults, admin overrides on top."""

    # An unsaved row holds every field empty (None, or "" for the objective): all environment values.
    row = row if row is not None else m.RoutingSettings()

    def pick(value: _T | None, default: _T) -> _T:
        return default if value is None or value == "" else value

    return SettingsInForce(
        smart_routing_enabled=bool(pick(row.smart_routing_enabled, settings.PRO_SMART_ROUTING_ENABLED)),
        smart_routing_threshold=int(pick(row.smart_routing_threshold, settings.PRO_SMART_ROUTING_THRESHOLD)),
        smart_routing_session_ttl_s=float(
            pick(row.smart_routing_session_ttl_seconds, settings.PRO_SMART_ROUTING_SESSION_TTL)
        ),
        smart_routing_keywords=tuple(pick(row.smart_routing_keywords, settings.PRO_SMART_ROUTING_KEYWORDS)),
        category_keywords=compile_category_keywords(row.category_keywords),
        category_long_context_tokens=int(pick(row.category_long_context_tokens, DEFAULT_LONG_CONTEXT_TOKENS)),
        routing_enabled=bool(pick(row.routing_enabled, settings.PRO_ROUTING_ENABLED)),
        routing_objective=str(pick(row.routing_objective, settings.PRO_ROUTING_OBJECTIVE)),
        min_weight_fraction=float(pick(row.min_weight_fraction, settings.PRO_ROUTING_MIN_WEIGHT_FRACTION)),
        cooldown_base_s=float(pick(row.cooldown_base_seconds, settings.PRO_ROUTING_COOLDOWN_BASE)),
        cooldown_max_s=float(pick(row.cooldown_max_seconds, settings.PRO_ROUTING_COOLDOWN_MAX)),
        warm_cache_weight=float(pick(row.warm_cache_weight, settings.PRO_ROUTING_WARM_CACHE_WEIGHT)),
        warm_cache_ttl_s=float(pick(row.warm_cache_ttl_seconds, settings.PRO_ROUTING_WARM_CACHE_TTL)),
        exploration=float(pick(row.exploration, settings.PRO_ROUTING_EXPLORATION)),
        cold_start_observations=int(pick(row.cold_start_observations, settings.PRO_ROUTING_COLD_START_OBSERVATIONS)),
        probe_interval_s=float(pick(row.probe_interval_seconds, settings.PRO_ROUTING_PROBE_INTERVAL)),
    )


def compile_category_keywords(value: object) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """The admin's per-category keyword lists as the classifier's hashable overrides, in precedence order."""
    if not isinstance(value, dict):
        return ()
    return tuple((category, tuple(str(k) for k in value[category]))
                 for category in KEYWORD_CATEGORIES if isinstance(value.get(category), list) and value[category])


def compile_limits(row: m.Team | m.GatewayKey) -> Limits:
    """A key's or team's limits as the request path counts them."""
    return Limits(rpm=row.rpm, tpm=row.tpm, max_concurrency=row.max_concurrency,
                  budget_usd=_float(row.budget_usd), budget_period=row.budget_period or "month")


def compile_table(version: int) -> RoutingTable:
    """A RoutingTable from the database as it is now (runs in a thread, never on the event loop)."""
    providers: list[ProviderSpec] = []
    for provider in m.Provider.objects.prefetch_related("keys").filter(enabled=True):
        keys: list[Secret] = []
        problems: list[str] = []
        # Every stored reference is checked against today's rules before its variable is read: a row written
        # before a rule existed, or past the admin, must not send a reserved variable's value anywhere.
        for key in provider.keys.all():
            found = look_up(key.reference)
            if found.value is not None:
                keys.append(Secret(found.value))
            else:
                shown = key.reference if m.env_reference_name(key.reference) else "(not a reference)"
                problems.append(f"key {shown}: {found.problem}")
        aws_keys: list[Secret] = []
        for name in AWS_REFERENCE_FIELDS:
            reference = getattr(provider, name)
            if not reference:
                continue
            found = look_up(reference)
            if found.value is not None:
                aws_keys.append(Secret(found.value))
            else:
                shown = reference if m.env_reference_name(reference) else "(not a reference)"
                problems.append(f"{name} {shown}: {found.problem}")
        if problems:
            log.warning("provider %s: %s%s", provider.name, "; ".join(problems),
                        "" if keys or aws_keys else "; no usable key, so its attempts fail without being sent")
        providers.append(
            ProviderSpec(
                name=provider.name,
                kind=provider.kind,
                base_url=provider.base_url.rstrip("/"),
                api_keys=tuple(keys),
                key_problems=tuple(problems),
                api_version=provider.api_version,
                timeout_s=float(provider.timeout_seconds),
                proxy=provider.proxy,
                ca_bundle=provider.ca_bundle,
                client_cert=provider.client_cert,
                client_key=provider.client_key,
                probe=provider.probe,
                region=provider.region,
                project=provider.project,
                credentials_file=provider.credentials_file,
                aws_keys=tuple(aws_keys) if len(aws_keys) >= 2 else (),
                allowed_betas=frozenset(provider.allowed_betas or ()),
            )
        )
    enabled_providers = {p.name for p in providers}

    models = [
        ModelSpec(
            name=row.name,
            provider=row.provider.name,
            upstream=row.upstream,
            input_price=_float(row.input_price),
            output_price=_float(row.output_price),
            cached_input_price=_float(row.cached_input_price),
            context_window=row.context_window,
            max_output_tokens=row.max_output_tokens,
            capabilities=frozenset(row.capabilities or ["text"]),
            model_class=row.model_class,
            enabled=row.enabled and row.provider.name in enabled_providers,
            rpm=row.rpm,
            tpm=row.tpm,
            strengths=frozenset(row.strengths or []),
            endpoints=frozenset(row.endpoints or ["chat"]),
            dimensions=row.dimensions,
            family=row.family,
        )
        for row in m.ProviderModel.objects.select_related("provider")
    ]
    contracts = [
        ContractSpec(
            workload=row.workload,
            version=row.version,
            modalities=frozenset(row.modalities or ["text"]),
            max_input_tokens=row.max_input_tokens,
            requires_tools=row.requires_tools,
            structured_output_required=row.structured_output_required,
            schema=row.schema or None,
            strict=row.strict,
            allowed_model_classes=frozenset(row.allowed_model_classes or []),
            max_cost_usd=_float(row.max_cost_usd),
            deadline_ms=row.deadline_ms,
            required_finish_reason=row.required_finish_reason or None,
            min_output_chars=row.min_output_chars,
            validator=row.validator,
        )
        for row in m.Contract.objects.all()
    ]
    virtual = [
        VirtualModelSpec(
            source=row.source,
            strategy=row.strategy,
            targets=tuple(TargetRef(t.target, float(t.weight)) for t in row.targets.all()),
            session_affinity=row.session_affinity,
            contract=row.contract.workload if row.contract else None,
            enabled=row.enabled,
        )
        for row in m.VirtualModel.objects.select_related("contract").prefetch_related("targets")
    ]
    # Routes from PRO_SMART_ROUTING_ROUTES are defaults; a route edited in the admin wins.
    routes = {
        alias: TierRouteSpec(alias=alias, easy=spec["easy"], hard=spec["hard"])
        for alias, spec in settings.PRO_SMART_ROUTING_ROUTES.items()
    }
    for row in m.TierRoute.objects.select_related("contract"):
        routes[row.alias] = TierRouteSpec(
            alias=row.alias,
            easy=row.easy,
            hard=row.hard,
            contract=row.contract.workload if row.contract else None,
            enabled=row.enabled,
        )
    category_routes = [
        CategoryRouteSpec(
            alias=row.alias,
            targets=row.category_targets(),
            default=row.default_target,
            contract=row.contract.workload if row.contract else None,
            enabled=row.enabled,
        )
        for row in m.CategoryRoute.objects.select_related("contract")
    ]
    policies = [
        PolicySpec(
            name=row.name,
            strategy=row.strategy,
            strength=row.strength or None,
            max_latency_ms=None if row.max_latency_ms is None else float(row.max_latency_ms),
            max_cost_usd=row.max_cost_usd,
            fallback_to=row.fallback_to.name if row.fallback_to else None,
        )
        for row in m.RoutingPolicy.objects.select_related("fallback_to")
    ]
    teams = {
        row.id: TeamSpec(name=row.name, limits=compile_limits(row), allowed_models=frozenset(row.allowed_models or []))
        for row in m.Team.objects.all()
    }
    gateway_keys = [
        KeySpec(
            id=row.id,
            name=row.name,
            secret_hash=row.secret_hash,
            allowed_models=frozenset(row.allowed_models or []),
            expires_at=_timestamp(row.expires_at),
            revoked=row.revoked,
            limits=compile_limits(row),
            team=teams.get(row.team_id) if row.team_id is not None else None,
        )
        for row in m.GatewayKey.objects.filter(revoked=False)
    ]
    if settings.GOMODEL_MASTER_KEY:
        gateway_keys.append(KeySpec(id=0, name="master", secret_hash=m.hash_secret(settings.GOMODEL_MASTER_KEY),
                                    is_master=True))
    return RoutingTable.build(
        version=version,
        providers=providers,
        models=models,
        virtual_models=virtual,
        tier_routes=list(routes.values()),
        category_routes=category_routes,
        policies=policies,
        contracts=contracts,
        keys=gateway_keys,
        settings=compile_settings(m.RoutingSettings.objects.filter(pk=1).first()),
        caches=[CacheSpec(name=row.model, ttl_s=float(row.ttl_seconds), scope=row.scope,  # type: ignore[arg-type]
                          generation=row.generation, enabled=row.enabled,
                          semantic=SemanticSpec(row.semantic_embeddings, float(row.semantic_threshold))
                          if row.semantic_embeddings else None)
                for row in m.ResponseCache.objects.all()],
    )


class Runtime:
    """Holds this process's RoutingTable and keeps it fresh."""

    def __init__(self) -> None:
        self._table: RoutingTable | None = None
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self.last_error: str | None = None

    @property
    def loaded(self) -> bool:
        return self._table is not None

    def table(self) -> RoutingTable:
        table = self._table
        if table is None:
            return RoutingTable()
        return table

    def swap(self, table: RoutingTable) -> None:
        """Replace the table in one reference assignment; requests in flight keep the one they started with."""
        self._table = table

    def reload_if_changed(self) -> bool:
        """Compile and swap when the stored version differs from ours; True when it swapped."""
        from routing.config.versioning import current_version

        with self._lock:
            try:
                version = current_version()
                if self._table is not None and version == self._table.version:
                    return False
                table = compile_table(version)
                # TLS files are read here, off the request path, and again at every change (rotated files).
                for problem in egress.prepare(table.providers.values()):
                    log.error("TLS files of %s: its attempts fail without being sent", problem)
                # Vertex AI providers' access tokens start being fetched now, in their own threads.
                gcp_tokens.sources.prepare(table.providers.values())
                self.swap(table)
                self.last_error = None
                log.info("routing table version %d loaded", version)
                return True
            except Exception as exc:  # noqa: BLE001 - keep serving the previous table; say why on /health/ready
                self.last_error = f"{type(exc).__name__}: {exc}"
                log.error("cannot reload the routing table: %s", self.last_error)
                return False
            finally:
                close_old_connections()

    def start(self) -> None:
        """Load once (in a thread: the caller may be inside an event loop), then poll in the background."""
        if self._thread is not None:
            return
        first = threading.Thread(target=self.reload_if_changed, name="gomodel-config-load")
        first.start()
        first.join(timeout=60)
        self._thread = threading.Thread(target=self._poll, name="gomodel-config-poll", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _poll(self) -> None:
        interval = settings.GOMODEL_CONFIG_POLL_SECONDS
        while not self._stop.wait(interval):
            self.reload_if_changed()


runtime = Runtime()


def current_table() -> RoutingTable:
    return runtime.table()
