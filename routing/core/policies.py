"""Named routing policies: which targets of a virtual model a request may use, in which order, and what to do
when none qualifies (the router-design article's policy engine with ``fallback_to`` chains).

A policy is chosen per request (``X-Routing-Policy: NAME``, ``metadata.routing_policy``, or the policy named
``default``) and applies at every virtual model the request resolves through. It has a strategy and
constraints:

==============  ============================================================================================
strategy        order in which the attempt loop tries the targets that meet the constraints
==============  ============================================================================================
``priority``    the virtual model's own declaration order (first listed first)
``strength``    the virtual model's own strategy (adaptive, round robin, ...), among the targets whose
                ``strengths`` include the policy's ``strength``
``cost``        cheapest first by the estimated cost of this request (input tokens x input price + expected
                output tokens x output price); unpriced targets after every priced one, in declared order
``latency``     fastest first by the latency estimate (peak EWMA); targets never measured after every
                measured one, in declared order
==============  ============================================================================================

Constraints filter targets: ``strength`` (the target, or for a nested virtual model one of its models, has it),
``max_latency_ms`` (the latency estimate is at most this; a target never measured is not held against it, as
the adaptive selector's cold start counts it as the fastest), ``max_cost_usd`` (the estimated cost is at most
this; an unpriced target is not held against it, as in workload contracts).

When no target both meets the constraints and is available now (not cooling, a probe slot free), the policy
falls back to its ``fallback_to`` policy, and so on down the chain (each step recorded with its reason). At the
end of the chain, targets that meet the constraints but are all cooling give the usual "every target is
cooling" answer; no target meeting them at all is *unmet* (the gateway answers 503 naming the policy and the
constraint). Chains are acyclic (``policy_problems`` refuses cycles at load); the walk still never visits a
policy twice.

Everything here is pure: the gateway passes the facts (``TargetFacts``) it read from the routing table, the
contract and the health registry. No request without a policy reaches this module.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from routing.core.names import did_you_mean

POLICY_STRATEGIES: tuple[str, ...] = ("priority", "strength", "cost", "latency")
DEFAULT_POLICY = "default"
POLICY_HEADER = "x-routing-policy"
POLICY_BODY_FIELD = "routing_policy"  # inside the body's ``metadata``
MAX_CHAIN = 16  # a chain longer than this is refused at load (and never walked further)

# Why a target does not qualify under a policy (bounded words: they reach metrics and the audit trail).
UNMET_STRENGTH = "strength"
UNMET_LATENCY = "max_latency_ms"
UNMET_COST = "max_cost_usd"
UNAVAILABLE = "unavailable"


@dataclass(frozen=True, slots=True)
class PolicySpec:
    """One named routing policy (see the module docstring)."""

    name: str
    strategy: str  # one of POLICY_STRATEGIES
    strength: str | None = None  # a strength tag some model carries (routing.core.categories.known_strengths)
    max_latency_ms: float | None = None
    max_cost_usd: float | None = None
    fallback_to: str | None = None

    @property
    def constraints(self) -> str:
        """The constraints as an operator wrote them, for messages: ``strength=code, max_latency_ms=800``."""
        parts = []
        if self.strength:
            parts.append(f"strength={self.strength}")
        if self.max_latency_ms is not None:
            parts.append(f"max_latency_ms={self.max_latency_ms:g}")
        if self.max_cost_usd is not None:
            parts.append(f"max_cost_usd={self.max_cost_usd:g}")
        return ", ".join(parts)


@dataclass(frozen=True, slots=True)
class TargetFacts:
    """What a policy reads about one target of a virtual model, in the virtual model's declared order."""

    name: str
    strengths: frozenset[str]  # for a nested virtual model: the union of its models' strengths
    cost_usd: float | None  # estimated cost of this request; nested: its cheapest priced model; None: unpriced
    latency_s: float | None  # latency estimate; nested: its fastest measured model; None: never measured
    available: bool  # not cooling now (health still decides again when the selector runs)


@dataclass(frozen=True, slots=True)
class PolicyStep:
    """One step down a fallback chain: ``from_policy`` left no qualifying target at ``virtual_model``."""

    from_policy: str
    to_policy: str
    virtual_model: str
    reason: str  # the reasons the targets did not qualify, e.g. "max_latency_ms" or "strength, unavailable"

    def as_event(self) -> dict[str, str]:
        return {"from": self.from_policy, "to": self.to_policy, "virtual_model": self.virtual_model,
                "reason": self.reason}


@dataclass(frozen=True, slots=True)
class PolicyOutcome:
    """A policy's decision at one virtual model.

    ``policy`` is the policy in force after the steps taken. ``order`` holds the indexes (into the facts) of the
    targets it allows, in the order to try them; empty when ``unmet``. ``keep_strategy``: the virtual model's own
    strategy orders ``order`` (strategy ``strength``). ``rejected`` lists ``(target, reason)`` under the policy in
    force.
    """

    policy: PolicySpec
    order: tuple[int, ...]
    keep_strategy: bool
    steps: tuple[PolicyStep, ...]
    rejected: tuple[tuple[str, str], ...]
    unmet: bool


def unmet_reason(policy: PolicySpec, facts: TargetFacts) -> str | None:
    """The constraint of ``policy`` that ``facts`` fails (the first one), or None when it qualifies."""
    if policy.strength and policy.strength not in facts.strengths:
        return UNMET_STRENGTH
    limit_ms = policy.max_latency_ms
    if limit_ms is not None and facts.latency_s is not None and facts.latency_s * 1000.0 > limit_ms:
        return UNMET_LATENCY
    limit_usd = policy.max_cost_usd
    if limit_usd is not None and facts.cost_usd is not None and facts.cost_usd > limit_usd:
        return UNMET_COST
    return None


def order_targets(policy: PolicySpec, facts: Sequence[TargetFacts], indexes: Sequence[int]) -> tuple[int, ...]:
    """``indexes`` (into ``facts``, declared order) in the order ``policy``'s strategy tries them."""
    if policy.strategy == "cost":
        priced = sorted((i for i in indexes if facts[i].cost_usd is not None), key=lambda i: facts[i].cost_usd or 0.0)
        return (*priced, *(i for i in indexes if facts[i].cost_usd is None))
    if policy.strategy == "latency":
        measured = sorted((i for i in indexes if facts[i].latency_s is not None),
                          key=lambda i: facts[i].latency_s or 0.0)
        return (*measured, *(i for i in indexes if facts[i].latency_s is None))
    return tuple(indexes)  # priority, and strength before the virtual model's own strategy runs


def apply_policy(
    policy: PolicySpec,
    policies: Mapping[str, PolicySpec],
    facts: Sequence[TargetFacts],
    *,
    virtual_model: str,
) -> PolicyOutcome:
    """Walk ``policy``'s fallback chain at one virtual model until a policy leaves an available target."""
    steps: list[PolicyStep] = []
    seen = {policy.name}
    while True:
        meeting: list[int] = []
        rejected: list[tuple[str, str]] = []
        available = False
        for index, target in enumerate(facts):
            reason = unmet_reason(policy, target)
            if reason is None:
                meeting.append(index)
                available = available or target.available
            else:
                rejected.append((target.name, reason))
        if available:
            return PolicyOutcome(policy, order_targets(policy, facts, meeting), policy.strategy == "strength",
                                 tuple(steps), tuple(rejected), unmet=False)
        following = policies.get(policy.fallback_to) if policy.fallback_to else None
        if following is None or following.name in seen or len(seen) >= MAX_CHAIN:
            # The end of the chain. Targets that qualify but are cooling: the selector answers with the
            # cooldown's Retry-After. None qualifying: unmet.
            return PolicyOutcome(policy, order_targets(policy, facts, meeting), policy.strategy == "strength",
                                 tuple(steps), tuple(rejected), unmet=not meeting)
        why = _summary([reason for _name, reason in rejected] + [UNAVAILABLE] * len(meeting))
        steps.append(PolicyStep(policy.name, following.name, virtual_model, why))
        seen.add(following.name)
        policy = following


def _summary(reasons: Sequence[str]) -> str:
    return ", ".join(dict.fromkeys(reasons)) or "no targets"


def chain_label(first: str, steps: Sequence[PolicyStep]) -> str:
    """The policies a request went through, ``fast>cheap>default`` (just ``fast`` without a step)."""
    names = [first]
    for step in steps:
        if step.to_policy != names[-1]:
            names.append(step.to_policy)
    return ">".join(names)


# ----------------------------------------------------------------------------------------------------------
# Checks, shared by the config file and the admin
# ----------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PolicyProblem:
    policy: str
    field: str  # the field of ``policy`` that is wrong
    message: str


def policy_problems(
    policies: Mapping[str, Mapping[str, object]], *, strengths: Collection[str]
) -> list[PolicyProblem]:
    """Problems of ``policies`` (name -> {strategy, strength, max_latency_ms, max_cost_usd, fallback_to}).

    Each field is checked: ``strength`` must be one of ``strengths`` (the categories and the tags the models
    carry, routing.core.categories.known_strengths), ``fallback_to`` must name another policy, and a chain may
    not come back to a policy it passed (reported as the cycle, ``cycle: fast -> cheap -> fast``) nor be longer
    than MAX_CHAIN.
    """
    problems: list[PolicyProblem] = []
    for name, policy in policies.items():
        strategy = policy.get("strategy")
        if strategy not in POLICY_STRATEGIES:
            problems.append(PolicyProblem(name, "strategy",
                                          f'unknown strategy "{strategy}" (expected {", ".join(POLICY_STRATEGIES)})'))
        strength = policy.get("strength")
        if strength is not None and strength not in strengths:
            problems.append(PolicyProblem(name, "strength", _unknown_strength(strength, strengths)))
        if strategy == "strength" and not strength:
            problems.append(PolicyProblem(name, "strength", "the strength strategy needs a strength"))
        latency = policy.get("max_latency_ms")
        if latency is not None and (isinstance(latency, bool) or not isinstance(latency, int) or not latency > 0):
            problems.append(PolicyProblem(name, "max_latency_ms",
                                          f"must be a whole number of milliseconds greater than 0, got {latency!r}"))
        cost = policy.get("max_cost_usd")
        if cost is not None and (isinstance(cost, bool) or not isinstance(cost, int | float) or not cost > 0):
            problems.append(PolicyProblem(name, "max_cost_usd", f"must be a number greater than 0, got {cost!r}"))
        fallback = policy.get("fallback_to")
        if fallback is None:
            continue
        if fallback == name:
            problems.append(PolicyProblem(name, "fallback_to", f"cycle: {name} -> {name}"))
        elif not isinstance(fallback, str) or fallback not in policies:
            problems.append(PolicyProblem(name, "fallback_to", f'unknown policy "{fallback}"'))
        else:
            problem = _chain_problem(name, policies)
            if problem:
                problems.append(PolicyProblem(name, "fallback_to", problem))
    return problems


def _unknown_strength(strength: object, strengths: Collection[str]) -> str:
    """The message for a strength that is no category and no model's tag, with the nearest known ones."""
    text = str(strength)[:40]
    hint = did_you_mean(text, strengths)
    return (f'unknown strength "{text}": neither a category nor a tag a model carries.{hint} '
            f'Known: {", ".join(strengths)}.')


def _chain_problem(name: str, policies: Mapping[str, Mapping[str, object]]) -> str:
    """A cycle ``name`` is part of, or a chain too long, from ``name`` on; "" when its chain ends well."""
    path = [name]
    current: object = policies[name].get("fallback_to")
    while isinstance(current, str) and current in policies:
        if current in path:
            cycle = path[path.index(current):] + [current]
            # Reported by each policy on the cycle; a policy leading into a cycle it is not on is fine to
            # report too, naming the cycle it reaches.
            return "cycle: " + " -> ".join(cycle)
        path.append(current)
        if len(path) > MAX_CHAIN:
            return f"the fallback chain is longer than {MAX_CHAIN} policies: {' -> '.join(path)}"
        current = policies[current].get("fallback_to")
    return ""
