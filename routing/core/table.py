"""RoutingTable: an immutable snapshot of the routing configuration that the request path reads.

The Django models are the source of truth; ``routing.config.runtime`` compiles them into one of these and swaps
a single reference when the configuration changes, so a request never sees half a change and never
touches the database.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from routing.core.cache import CacheSpec
from routing.core.limits import Limits, LimitScope
from routing.core.names import AliasedModels, model_aliases
from routing.core.policies import PolicySpec

CAPABILITIES = ("text", "image", "audio", "file", "tools", "json_schema", "reasoning")
# OpenAI-compatible hosts with their own default URL and rules (routing.providers.openai.presets).
OPENAI_PRESET_KINDS = (
    "mistral", "groq", "deepseek", "together", "fireworks", "openrouter", "ollama", "vllm", "lmstudio",
)
PROVIDER_KINDS = (
    "openai", "azure_openai", "anthropic", "gemini", "cohere", "bedrock", "vertex", "vertex_anthropic",
    *OPENAI_PRESET_KINDS,
)
STRATEGIES = ("round_robin", "weighted", "failover", "cost", "adaptive")
OBJECTIVES = ("balanced", "latency", "cost")
# What a model serves: "chat" (chat completions, messages) or "embeddings"; a model serves "chat" unless told.
ENDPOINTS = ("chat", "embeddings")
MAX_VIRTUAL_DEPTH = 8


class Secret:
    """A provider key in memory. Its repr and str never show the value, so it cannot leak into a log."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret('********')"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)


@dataclass(frozen=True, slots=True)
class ProviderSpec:
    name: str
    kind: str  # one of PROVIDER_KINDS
    base_url: str
    api_keys: tuple[Secret, ...] = ()  # the configured keys that resolved to a value
    # Why configured keys gave no value (a reference refused, a variable unset): names, never values. With
    # problems and no key left, an attempt fails as a configuration error instead of going out without a key.
    key_problems: tuple[str, ...] = ()
    api_version: str = ""  # azure_openai only
    timeout_s: float = 600.0
    # How the provider is reached (docs/providers.md): "" takes HTTPS_PROXY / HTTP_PROXY / NO_PROXY from the
    # environment, "direct" no proxy at all, or an http://host:port proxy of its own. TLS files are PEM paths:
    # a CA bundle trusted instead of the system store, and a client certificate (and key) for mutual TLS.
    proxy: str = ""
    ca_bundle: str = ""
    client_cert: str = ""
    client_key: str = ""
    # How a cooling target of this provider is proved by the background prober (routing.core.probes): "models",
    # "completion", "off", or "" for the cheapest call its format allows.
    probe: str = ""
    # Cloud providers (routing.config.provider_cloud): Bedrock's region, or Vertex AI's location and project and
    # its service-account file ("" for Application Default Credentials). ``aws_keys`` holds Bedrock's resolved
    # access key id, secret access key and, when given, session token; empty means the AWS credential chain.
    region: str = ""
    project: str = ""
    credentials_file: str = ""
    aws_keys: tuple[Secret, ...] = ()
    # The betas an Anthropic client's ``anthropic-beta`` may switch on at this provider (a beta can change the
    # price); any other is dropped and named in the answer's X-GoModel-Dropped-Betas. Empty: none is sent.
    allowed_betas: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """A concrete model on one provider. Prices are USD per 1M tokens; ``None`` means unpriced."""

    name: str  # public name, `provider/upstream` unless given
    provider: str
    upstream: str
    input_price: float | None = None
    output_price: float | None = None
    cached_input_price: float | None = None
    context_window: int | None = None
    max_output_tokens: int | None = None
    capabilities: frozenset[str] = frozenset({"text"})
    model_class: str = "general"
    enabled: bool = True
    rpm: int | None = None  # the provider's requests per minute for this account; None: no limit
    tpm: int | None = None  # the provider's tokens per minute (input + output of real answers)
    # Tags an operator chose (letters, digits, - and _): the content categories and any other, e.g. "reasoning"
    # (routing.core.categories.strength_tag_problem); routing policies select by them.
    strengths: frozenset[str] = frozenset()
    endpoints: frozenset[str] = frozenset({"chat"})  # of ENDPOINTS
    # An embedding model's vector size and family: targets of one embeddings virtual model share both, so a
    # fallback returns vectors comparable with the primary's.
    dimensions: int | None = None
    family: str = ""


@dataclass(frozen=True, slots=True)
class TargetRef:
    name: str  # a concrete model or another virtual model
    weight: float = 1.0


@dataclass(frozen=True, slots=True)
class VirtualModelSpec:
    source: str
    strategy: str  # one of STRATEGIES
    targets: tuple[TargetRef, ...]
    session_affinity: bool = True
    contract: str | None = None
    enabled: bool = True


@dataclass(frozen=True, slots=True)
class TierRouteSpec:
    alias: str
    easy: str
    hard: str
    contract: str | None = None
    enabled: bool = True


@dataclass(frozen=True, slots=True)
class CategoryRouteSpec:
    """An alias whose target depends on the request's content category; ``default`` for any category not listed.

    A target is a model, a virtual model or a tier alias (the category decides first, then easy/hard).
    """

    alias: str
    targets: Mapping[str, str]  # category -> target name, only the categories given
    default: str
    contract: str | None = None
    enabled: bool = True

    def target_for(self, category: str) -> str:
        return self.targets.get(category, self.default)

    def target_names(self) -> tuple[str, ...]:
        """Every target the route can choose, each once: the listed categories' then the default."""
        return tuple(dict.fromkeys((*self.targets.values(), self.default)))


@dataclass(frozen=True, slots=True)
class ContractSpec:
    """What an answer for one workload must satisfy; see docs/reliability.md."""

    workload: str
    version: int = 1
    modalities: frozenset[str] = frozenset({"text"})
    max_input_tokens: int | None = None
    requires_tools: bool = False
    structured_output_required: bool = False
    schema: Mapping[str, Any] | None = None
    strict: bool = False
    allowed_model_classes: frozenset[str] = frozenset()  # empty: any class
    max_cost_usd: float | None = None
    deadline_ms: int | None = None
    required_finish_reason: str | None = None  # e.g. "stop": a truncated answer is refused
    min_output_chars: int | None = None
    validator: str = ""  # dotted path of an operator-registered callable, resolved outside core


@dataclass(frozen=True, slots=True)
class TeamSpec:
    """A team of gateway keys: limits its keys share, and the models they may use (empty: every model)."""

    name: str
    limits: Limits = field(default_factory=Limits)
    allowed_models: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class KeySpec:
    """A gateway key as the request path sees it: only the hash of the secret is kept."""

    id: int
    name: str
    secret_hash: str  # sha256 hex of the presented secret
    allowed_models: frozenset[str] = frozenset()  # empty: every model
    expires_at: float | None = None  # unix time
    revoked: bool = False
    is_master: bool = False
    limits: Limits = field(default_factory=Limits)
    team: TeamSpec | None = None
    # The key's and its team's limits that are set, key first; derived once here, read on every request.
    limit_scopes: tuple[LimitScope, ...] = field(default=(), compare=False, repr=False)
    # Whether a scope limits tokens per minute / has a budget: then a request holds a reservation of that kind.
    reserves_tokens: bool = field(default=False, compare=False, repr=False)
    reserves_money: bool = field(default=False, compare=False, repr=False)
    # The same scopes with only their rpm and concurrency: what a request that calls no model is counted against.
    request_scopes: tuple[LimitScope, ...] = field(default=(), compare=False, repr=False)

    def __post_init__(self) -> None:
        scopes = []
        if not self.is_master:
            team = self.team
            team_name = "" if team is None else team.name
            if self.limits.active:
                scopes.append(LimitScope("key", self.name, f"key:{self.id}", self.limits, team_name))
            if team is not None and team.limits.active:
                scopes.append(LimitScope("team", team.name, f"team:{team.name}", team.limits, team_name))
        object.__setattr__(self, "limit_scopes", tuple(scopes))
        object.__setattr__(self, "reserves_tokens", any(s.limits.tpm is not None for s in scopes))
        object.__setattr__(self, "reserves_money", any(s.limits.budget_usd is not None for s in scopes))
        object.__setattr__(self, "request_scopes", tuple(
            LimitScope(s.kind, s.name, s.ident, Limits(rpm=s.limits.rpm, max_concurrency=s.limits.max_concurrency))
            for s in scopes if s.limits.rpm is not None or s.limits.max_concurrency is not None))

    @property
    def team_name(self) -> str:
        return "" if self.team is None else self.team.name

    def allows(self, model: str) -> bool:
        """Whether the key may call ``model``: it must be within the key's list and its team's."""
        if self.allowed_models and model not in self.allowed_models:
            return False
        team = self.team
        return team is None or not team.allowed_models or model in team.allowed_models


@dataclass(frozen=True, slots=True)
class SettingsInForce:
    """The PRO_SMART_ROUTING_* and PRO_ROUTING_* values in force (environment defaults, admin overrides)."""

    smart_routing_enabled: bool = True
    smart_routing_threshold: int = 4
    smart_routing_session_ttl_s: float = 1800.0
    smart_routing_keywords: tuple[str, ...] = ()  # empty: the classifier's built-in list
    # (category, keywords) pairs replacing the category classifier's built-in lists; hashable for its cache
    category_keywords: tuple[tuple[str, tuple[str, ...]], ...] = ()
    category_long_context_tokens: int = 32_000
    routing_enabled: bool = True
    routing_objective: str = "balanced"
    min_weight_fraction: float = 0.05
    cooldown_base_s: float = 30.0
    cooldown_max_s: float = 300.0
    warm_cache_weight: float = 8.0
    warm_cache_ttl_s: float = 600.0
    exploration: float = 0.01  # share of an adaptive virtual model's picks drawn uniformly (0-0.5)
    cold_start_observations: int = 5  # latency samples before a target's own estimate counts
    probe_interval_s: float = 15.0  # how often cooling and locked-out targets are probed; 0: never


def _frozen(mapping: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return MappingProxyType(dict(mapping or {}))


@dataclass(frozen=True, slots=True)
class RoutingTable:
    version: int = 0
    providers: Mapping[str, ProviderSpec] = field(default_factory=lambda: _frozen({}))
    models: Mapping[str, ModelSpec] = field(default_factory=lambda: _frozen({}))
    virtual_models: Mapping[str, VirtualModelSpec] = field(default_factory=lambda: _frozen({}))
    tier_routes: Mapping[str, TierRouteSpec] = field(default_factory=lambda: _frozen({}))
    category_routes: Mapping[str, CategoryRouteSpec] = field(default_factory=lambda: _frozen({}))
    policies: Mapping[str, PolicySpec] = field(default_factory=lambda: _frozen({}))  # named routing policies
    contracts: Mapping[str, ContractSpec] = field(default_factory=lambda: _frozen({}))
    keys_by_hash: Mapping[str, KeySpec] = field(default_factory=lambda: _frozen({}))
    settings: SettingsInForce = field(default_factory=SettingsInForce)
    caches: Mapping[str, CacheSpec] = field(default_factory=lambda: _frozen({}))  # by requested name
    # What leaf_models and endpoints_of answered for each of the table's names: the table never changes, and
    # every request asks the same few names several times (planning, tier escalation, the response).
    _leaves: dict[str, tuple[ModelSpec, ...]] = field(default_factory=dict, init=False, repr=False, compare=False)
    _endpoints: dict[str, frozenset[str]] = field(default_factory=dict, init=False, repr=False, compare=False)
    _kinds: dict[str, str] = field(default_factory=dict, init=False, repr=False, compare=False)
    _prices: dict[str, float | None] = field(default_factory=dict, init=False, repr=False, compare=False)
    _virtual_below: dict[str, tuple[str, ...]] = field(default_factory=dict, init=False, repr=False, compare=False)

    @staticmethod
    def build(
        *,
        version: int,
        providers: list[ProviderSpec] | tuple[ProviderSpec, ...] = (),
        models: list[ModelSpec] | tuple[ModelSpec, ...] = (),
        virtual_models: list[VirtualModelSpec] | tuple[VirtualModelSpec, ...] = (),
        tier_routes: list[TierRouteSpec] | tuple[TierRouteSpec, ...] = (),
        category_routes: list[CategoryRouteSpec] | tuple[CategoryRouteSpec, ...] = (),
        policies: list[PolicySpec] | tuple[PolicySpec, ...] = (),
        contracts: list[ContractSpec] | tuple[ContractSpec, ...] = (),
        keys: list[KeySpec] | tuple[KeySpec, ...] = (),
        settings: SettingsInForce | None = None,
        caches: list[CacheSpec] | tuple[CacheSpec, ...] = (),
    ) -> RoutingTable:
        # Each model with a slash in its name is callable by its slash-free alias too (routing.core.names),
        # unless the alias would meet another public name; a key listing the model may use its alias.
        others = [*(v.source for v in virtual_models), *(t.alias for t in tier_routes),
                  *(c.alias for c in category_routes)]
        aliases = model_aliases([m.name for m in models], others)
        if aliases:
            keys = [_with_aliases(k, aliases) for k in keys]
        return RoutingTable(
            version=version,
            providers=_frozen({p.name: p for p in providers}),
            models=AliasedModels(_frozen({m.name: m for m in models}), _frozen(aliases)),
            virtual_models=_frozen({v.source: v for v in virtual_models}),
            tier_routes=_frozen({t.alias: t for t in tier_routes}),
            category_routes=_frozen({c.alias: c for c in category_routes}),
            policies=_frozen({p.name: p for p in policies}),
            contracts=_frozen({c.workload: c for c in contracts}),
            keys_by_hash=_frozen({k.secret_hash: k for k in keys}),
            settings=settings or SettingsInForce(),
            caches=_frozen({c.name: c for c in caches if c.enabled}),
        )

    def kind_of(self, name: str) -> str | None:
        """``"tier"``, ``"category"``, ``"virtual"``, ``"model"`` or None for a name a client may send as ``model``."""
        found = self._kinds.get(name)
        if found is None:
            found = self._kind_of(name)
            if found is not None:  # only names the table has: a client's unknown model names must not grow it
                self._kinds[name] = found
        return found

    def _kind_of(self, name: str) -> str | None:
        if name in self.tier_routes and self.tier_routes[name].enabled:
            return "tier"
        if name in self.category_routes and self.category_routes[name].enabled:
            return "category"
        if name in self.virtual_models and self.virtual_models[name].enabled:
            return "virtual"
        if name in self.models and self.models[name].enabled:
            return "model"
        return None

    def leaf_models(self, name: str, _depth: int = 0) -> tuple[ModelSpec, ...]:
        """Every enabled concrete model that ``name`` can end up at, in declaration order, without repeats."""
        if _depth == 0:
            found = self._leaves.get(name)
            if found is None:
                found = self._leaf_models(name, 0)
                if found:  # only names the table has: a client's unknown model names must not grow it
                    self._leaves[name] = found
            return found
        return self._leaf_models(name, _depth)

    def virtual_models_below(self, name: str) -> tuple[str, ...]:
        """``name`` and every virtual model below it (depth first, repeats kept), when ``name`` is a virtual
        model; () for any other name."""
        found = self._virtual_below.get(name)
        if found is None:
            found = tuple(self._virtual_models_below(name, 0))
            if found:  # only the table's virtual models: a client's unknown names must not grow it
                self._virtual_below[name] = found
        return found

    def _virtual_models_below(self, name: str, depth: int) -> list[str]:
        virtual = self.virtual_models.get(name)
        if virtual is None or depth > MAX_VIRTUAL_DEPTH:
            return []
        found = [name]
        for target in virtual.targets:
            found += self._virtual_models_below(target.name, depth + 1)
        return found

    def cheapest_price(self, name: str) -> float | None:
        """Input + output price per 1M tokens of the cheapest priced model ``name`` can end up at; None when none
        of them is priced."""
        if name in self._prices:
            return self._prices[name]
        prices = [(m.input_price or 0.0) + (m.output_price or 0.0) for m in self.leaf_models(name)
                  if m.input_price is not None or m.output_price is not None]
        found = min(prices) if prices else None
        if self.kind_of(name) is not None:  # only names the table has
            self._prices[name] = found
        return found

    def _leaf_models(self, name: str, _depth: int) -> tuple[ModelSpec, ...]:
        if _depth > MAX_VIRTUAL_DEPTH:
            return ()
        model = self.models.get(name)
        if model is not None:
            return (model,) if model.enabled else ()
        seen: dict[str, ModelSpec] = {}
        names: list[str] = []
        route = self.tier_routes.get(name)
        if route is not None:
            names = [route.easy, route.hard]
        category_route = self.category_routes.get(name)
        if category_route is not None:
            names = list(category_route.target_names())
        virtual = self.virtual_models.get(name)
        if virtual is not None:
            names = [t.name for t in virtual.targets]
        for child in names:
            for leaf in self._leaf_models(child, _depth + 1):
                seen.setdefault(leaf.name, leaf)
        return tuple(seen.values())

    def endpoints_of(self, name: str) -> frozenset[str]:
        """The endpoints ``name`` serves: a model's own, or those its every reachable model serves."""
        found = self._endpoints.get(name)
        if found is None:
            leaves = self.leaf_models(name)
            if not leaves:
                return frozenset()
            found = self._endpoints[name] = frozenset.intersection(*(leaf.endpoints for leaf in leaves))
        return found

    def public_names(self) -> tuple[str, ...]:
        """Every name a client may use as ``model``: tier and category aliases, virtual models, concrete models."""
        names = [a for a, t in self.tier_routes.items() if t.enabled]
        names += [a for a, c in self.category_routes.items() if c.enabled]
        names += [s for s, v in self.virtual_models.items() if v.enabled]
        names += [n for n, m in self.models.items() if m.enabled]
        names += [a for a, n in self.model_aliases().items() if self.models[n].enabled]
        return tuple(dict.fromkeys(names))

    def model_aliases(self) -> Mapping[str, str]:
        """``{slash-free alias: public name}`` of the models (routing.core.names)."""
        models = self.models
        return models.aliases if isinstance(models, AliasedModels) else {}

    def public_name_of(self, name: str) -> str:
        """The public name ``name`` stands for: a model's for its slash-free alias, else ``name`` itself."""
        return self.model_aliases().get(name, name)


def _with_aliases(key: KeySpec, aliases: Mapping[str, str]) -> KeySpec:
    """``key`` whose allowed models (and its team's) also hold the slash-free alias of each model listed."""
    def widened(allowed: frozenset[str]) -> frozenset[str]:
        return allowed | {alias for alias, name in aliases.items() if name in allowed} if allowed else allowed

    team = key.team
    if team is not None and team.allowed_models:
        team = replace(team, allowed_models=widened(team.allowed_models))
    if team is key.team and not key.allowed_models:
        return key
    return replace(key, allowed_models=widened(key.allowed_models), team=team)
