"""Background health probes, the pure part: which targets to probe, with what call, and what a result does.

The prober (``routing.gateway.background.prober``) wakes every ``PRO_ROUTING_PROBE_INTERVAL`` and asks ``plan_probes``
which targets want a probe: those whose breaker is *cooling* (not yet half-open) because of

- transient failures (5xx, overloaded, connect errors, timeouts, cut streams): a passing probe ends the cooldown
  early (``TargetHealth.close_by_probe``);
- a lockout (401/403/404, quota, no usable key): a probe is sent with the provider's *current* key, so it passes
  only once the key (or the model name) is fixed; a failing one keeps the lockout in force.

Never probed: a breaker a 429 touched (its Retry-After is honoured to the end, and a probe would spend the very
quota the provider asked us to spare), one opened by invalid answers (a probe cannot prove an answer's
content), and a provider whose ``probe`` is ``off``.

The call: ``models`` (the provider's model listing or model lookup: free, and it proves the key and the model)
where the wire format has one that names the model, otherwise ``completion`` (a one-token chat completion,
priced like any answer). A listing that does not name the model proves nothing by itself (a provider may list
only some of the models it serves): a one-token completion follows, and its outcome is the probe's, so a listing
never turns a 5xx cooldown into a lockout nor extends one.

The same call, sent at once with the gateway's own credentials, confirms a 401/403/404 that one gateway key saw
(``routing.core.lockouts``, reason ``confirm``): a lockout answer locks the target out for every key
(``TargetHealth.record_lockout``), a pass dismisses it, anything else leaves it to that key alone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

from routing.core.cooldown import failure_kind
from routing.core.health import COOLING, TargetHealth
from routing.core.lockouts import LockoutSuspicions
from routing.core.outcome import AttemptOutcome
from routing.core.table import OPENAI_PRESET_KINDS

ProbeMode = Literal["models", "completion", "off"]
PROBE_MODES: tuple[ProbeMode, ...] = ("models", "completion", "off")
# Provider kinds whose models endpoint proves one model: OpenAI's listing (the presets' too), Anthropic's and
# Gemini's model lookup. Azure OpenAI's listing names base models, not the deployment a request goes to, so it
# proves nothing there. Cohere is proved by a one-token completion.
MODELS_PROBE_KINDS = frozenset({"openai", "anthropic", "gemini", *OPENAI_PRESET_KINDS})

# ``confirm``: not a round's probe but the immediate one that confirms or dismisses a lockout one gateway key saw
# (routing.core.lockouts); it ``confirmed`` the lockout for every key, or ``dismissed`` it.
ProbeReason = Literal["transient", "lockout", "confirm"]
ProbeEffect = Literal["closed", "extended", "unchanged", "confirmed", "dismissed"]
PASSED = "passed"

MIN_INTERVAL_S = 0.1  # below this a prober would spin; 0 switches probes off
LEASE_RENEW_MAX_S = 5.0  # the cluster lease is renewed at least this often, whatever the interval


def probe_mode(kind: str, configured: str) -> ProbeMode:
    """The call that proves a target of a provider: the configured one, else the cheapest its format allows."""
    if configured in PROBE_MODES:
        return configured
    return "models" if kind in MODELS_PROBE_KINDS else "completion"


def mode_problem(kind: str, configured: str) -> str | None:
    """Why ``probe: configured`` cannot be used for a provider of ``kind``; None when it can."""
    if configured in ("", "completion", "off"):
        return None
    if configured == "models":
        if kind in MODELS_PROBE_KINDS:
            return None
        return (f"{kind} has no models call that proves a deployment; use completion (a one-token completion) "
                f"or off")
    return f"expected one of {', '.join(PROBE_MODES)}, got {configured!r}"


def probe_reason(health: TargetHealth, now: float) -> ProbeReason | None:
    """Why the target wants a background probe now, or None (healthy, half-open, a 429, invalid answers)."""
    if health.status(now) != COOLING:
        return None
    kind = health.open_kind
    if kind == "transient" or kind == "lockout":
        return kind
    return None


@dataclass(frozen=True, slots=True)
class ProbeCandidate:
    """A configured target and how its provider is probed."""

    target: str
    provider: str
    mode: ProbeMode


@dataclass(frozen=True, slots=True)
class ProbeTask:
    target: str
    provider: str
    mode: ProbeMode
    reason: ProbeReason


def plan_probes(candidates: Iterable[ProbeCandidate], peek: Callable[[str], TargetHealth | None],
                now: float) -> list[ProbeTask]:
    """The probes to send this round, in the candidates' order. ``peek`` never creates health (a target never
    tried has nothing to prove)."""
    tasks = []
    for candidate in candidates:
        if candidate.mode == "off":
            continue
        health = peek(candidate.target)
        reason = None if health is None else probe_reason(health, now)
        if reason is not None:
            tasks.append(ProbeTask(candidate.target, candidate.provider, candidate.mode, reason))
    return tasks


def apply_probe(health: TargetHealth, outcome: AttemptOutcome, started: float, now: float) -> ProbeEffect:
    """What a probe's outcome does to its target: ``closed`` (the cooldown ended early), ``extended`` (a lockout
    or a 429 holds it longer) or ``unchanged`` (a transient failure, or a verdict that changed meanwhile)."""
    if outcome.ok:
        return "closed" if health.close_by_probe(started, now) else "unchanged"
    before = health.cooldown_until
    health.record_probe_failure(outcome, now)
    return "extended" if health.cooldown_until != before else "unchanged"


def apply_confirmation(health: TargetHealth, suspicions: LockoutSuspicions, outcome: AttemptOutcome,
                       now: float) -> ProbeEffect:
    """What a confirmation probe's outcome does to a lockout one gateway key saw at ``health``'s target:
    ``confirmed`` (locked out for every key), ``dismissed`` (no key avoids it any more) or ``unchanged`` (it
    proved nothing: the key that saw the lockout keeps avoiding the target until its suspicion expires)."""
    if outcome.ok:
        suspicions.dismiss(health.name, now)
        return "dismissed"
    if failure_kind(outcome) == "lockout":
        suspicions.clear(health.name)
        health.record_lockout(outcome, now)
        return "confirmed"
    return "unchanged"


def result_word(outcome: AttemptOutcome) -> str:
    """The probe's result as metrics and the admin show it: ``passed``, else the failure's reason word."""
    return PASSED if outcome.ok else outcome.reason


def lease_timing(interval_s: float) -> tuple[float, float]:
    """(how often the prober wakes, how long the cluster lease lasts without renewal).

    The prober wakes at least every ``LEASE_RENEW_MAX_S`` to renew, so a long interval does not make a dead
    holder's lease outlive it for long; the lease covers three wake-ups, so one slow round never loses it.
    """
    tick = min(interval_s, LEASE_RENEW_MAX_S)
    return tick, 3 * tick


@dataclass(frozen=True, slots=True)
class ProbeReported:
    """One probe's result, as the prober tells the other processes (shown by their admin pages)."""

    target: str
    result: str  # ``passed`` or the failure's reason word
    effect: ProbeEffect


@dataclass(frozen=True, slots=True)
class LastProbe:
    """The latest probe of a target known to this process, for the admin's live state."""

    at_unix: float  # wall-clock time, for display only
    result: str
    effect: ProbeEffect | str
    origin: str | None = None  # the process that probed; None: this one
