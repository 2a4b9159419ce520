"""Scripted faults: what a simulated provider does wrong, for which requests, and for how long.

A fault is a ``kind`` plus optional ``times`` (apply to the next N requests that match, then recover;
omitted means forever), ``probability`` (each matching request rolls the simulator's seeded random
generator) and the kind's own parameters. Faults are keyed by a model name, an Azure deployment name, a
request path, or ``"*"`` (every request); a key holds a *script*: a list of faults applied in order, each
until its ``times`` run out, so "two 429s, then a timeout, then healthy" is one script.
"""

from __future__ import annotations

import random
import threading
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

_REQUIRED = object()

# Every kind with its parameters and their defaults. ``_REQUIRED`` marks a parameter without a default.
FAULT_PARAMETERS: dict[str, dict[str, Any]] = {
    "rate_limit": {"retry_after": 1.0, "retry_after_ms": None, "insufficient_quota": False, "message": None},
    "status": {"status": _REQUIRED, "retry_after": None, "retry_after_ms": None, "message": None},
    "connect_refused": {"reset": False},
    "timeout": {"seconds": 60.0},
    "slow_first_byte": {"ms": 2000.0},
    "slow": {"ms": 2000.0},
    "stream_cut": {"after_chunks": 2},
    "stream_error": {"after_chunks": 2, "status": 529, "message": None},
    "malformed_json": {},
    "context_overflow": {},
    "truncate": {},
    "schema_violation": {},
    "unknown_tool": {"tool": "undeclared_tool"},
    "empty": {},
}
FAULT_KINDS = tuple(FAULT_PARAMETERS)

# Kinds answered with an error status instead of a completion.
ERROR_KINDS = frozenset({"rate_limit", "status", "context_overflow"})
# Kinds that change what the completion says (the delivery stays normal).
CONTENT_KINDS = frozenset({"truncate", "schema_violation", "unknown_tool", "empty"})

_NUMBER_PARAMS = {"retry_after", "retry_after_ms", "seconds", "ms"}
_INT_PARAMS = {"after_chunks"}
_BOOL_PARAMS = {"insufficient_quota", "reset"}
_TEXT_PARAMS = {"message", "tool"}
_STATUS_PARAMS = {"status"}
_NULLABLE = {"retry_after", "retry_after_ms", "message"}


class FaultError(ValueError):
    """A fault description that cannot be used; the message names the offending field."""


@dataclass(frozen=True, slots=True)
class Fault:
    """One scripted misbehaviour. ``params`` holds every parameter of the kind, defaults filled in."""

    kind: str
    times: int | None = None
    probability: float = 1.0
    params: Mapping[str, Any] = field(default_factory=dict)

    def param(self, name: str) -> Any:
        return self.params[name]

    def to_dict(self) -> dict[str, Any]:
        """The fault as the JSON/YAML shape it was written in (for ``GET /_sim/faults``)."""
        data: dict[str, Any] = {"kind": self.kind, **self.params}
        if self.times is not None:
            data["times"] = self.times
        if self.probability != 1.0:
            data["probability"] = self.probability
        return data


def parse_fault(data: Any, where: str = "fault") -> Fault:
    """A validated Fault from its dict form; raises FaultError naming ``where`` and the field."""
    if isinstance(data, Fault):
        return data
    if not isinstance(data, Mapping):
        raise FaultError(f"{where}: expected a mapping with a 'kind', got {type(data).__name__}")
    kind = data.get("kind")
    if kind not in FAULT_PARAMETERS:
        raise FaultError(f"{where}.kind: unknown fault kind {kind!r}; known: {', '.join(FAULT_KINDS)}")
    known = FAULT_PARAMETERS[kind]
    params: dict[str, Any] = {}
    for name, value in data.items():
        if name in ("kind", "times", "probability"):
            continue
        if name not in known:
            allowed = ", ".join(["times", "probability", *known]) or "times, probability"
            raise FaultError(f"{where}.{name}: not a parameter of {kind!r} (allowed: {allowed})")
        params[name] = _checked_param(name, value, f"{where}.{name}")
    for name, default in known.items():
        if name not in params:
            if default is _REQUIRED:
                raise FaultError(f"{where}.{name}: required for kind {kind!r}")
            params[name] = default
    return Fault(
        kind=kind,
        times=_checked_times(data.get("times"), f"{where}.times"),
        probability=_checked_probability(data.get("probability", 1.0), f"{where}.probability"),
        params=params,
    )


def parse_script(data: Any, where: str = "fault") -> tuple[Fault, ...]:
    """A fault script from one fault mapping or a list of them."""
    if isinstance(data, (Mapping, Fault)):
        return (parse_fault(data, where),)
    if isinstance(data, Sequence) and not isinstance(data, str | bytes):
        if not data:
            raise FaultError(f"{where}: an empty list of faults")
        return tuple(parse_fault(item, f"{where}[{index}]") for index, item in enumerate(data))
    raise FaultError(f"{where}: expected a fault mapping or a list of them, got {type(data).__name__}")


def _checked_param(name: str, value: Any, where: str) -> Any:
    if value is None and name in _NULLABLE:
        return None
    if name in _NUMBER_PARAMS:
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise FaultError(f"{where}: expected a number >= 0, got {value!r}")
        return float(value)
    if name in _INT_PARAMS:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise FaultError(f"{where}: expected an integer >= 0, got {value!r}")
        return value
    if name in _BOOL_PARAMS:
        if not isinstance(value, bool):
            raise FaultError(f"{where}: expected true or false, got {value!r}")
        return value
    if name in _STATUS_PARAMS:
        if isinstance(value, bool) or not isinstance(value, int) or not 400 <= value <= 599:
            raise FaultError(f"{where}: expected an HTTP error status 400-599, got {value!r}")
        return value
    if name in _TEXT_PARAMS:
        if not isinstance(value, str) or not value:
            raise FaultError(f"{where}: expected a non-empty string, got {value!r}")
        return value
    raise FaultError(f"{where}: unsupported parameter")  # unreachable while the tables agree


def _checked_times(value: Any, where: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise FaultError(f"{where}: expected an integer >= 1 (omit it for 'forever'), got {value!r}")
    return value


def _checked_probability(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= value <= 1.0:
        raise FaultError(f"{where}: expected a number between 0 and 1, got {value!r}")
    return float(value)


class _Slot:
    """A fault in a script with the number of applications it has left (None: forever)."""

    __slots__ = ("fault", "remaining")

    def __init__(self, fault: Fault) -> None:
        self.fault = fault
        self.remaining = fault.times


class FaultBook:
    """The active fault scripts, keyed by model, deployment, path or ``"*"``; safe to use from any thread.

    The request path calls :meth:`draw` with the request's keys, most specific first; the first key that
    holds a script decides alone (a probability miss there means "no fault", not "try the next key").
    """

    def __init__(self, seed: int = 0) -> None:
        self._lock = threading.Lock()
        self._scripts: dict[str, deque[_Slot]] = {}
        self._seed = seed
        self._rng = random.Random(seed)

    def set(self, key: str, script: Iterable[Fault]) -> None:
        """Replace the script for ``key``."""
        slots = deque(_Slot(fault) for fault in script)
        with self._lock:
            if slots:
                self._scripts[key] = slots
            else:
                self._scripts.pop(key, None)

    def clear(self, key: str | None = None) -> None:
        """Remove the script for ``key``, or every script when ``key`` is None."""
        with self._lock:
            if key is None:
                self._scripts.clear()
            else:
                self._scripts.pop(key, None)

    def reseed(self) -> None:
        """Restart the random generator from the configured seed (same rolls as a fresh simulator)."""
        with self._lock:
            self._rng = random.Random(self._seed)

    def draw(self, keys: Iterable[str]) -> Fault | None:
        """The fault to apply to a request with these keys, consuming one of its ``times``; or None."""
        if not self._scripts:  # the common, fault-free case stays lock-free
            return None
        with self._lock:
            for key in keys:
                script = self._scripts.get(key)
                if not script:
                    continue
                slot = script[0]
                if slot.fault.probability < 1.0 and self._rng.random() >= slot.fault.probability:
                    return None
                if slot.remaining is not None:
                    slot.remaining -= 1
                    if slot.remaining <= 0:
                        script.popleft()
                        if not script:
                            del self._scripts[key]
                return slot.fault
            return None

    def snapshot(self) -> dict[str, list[dict[str, Any]]]:
        """The active scripts as plain data, with each fault's remaining applications."""
        with self._lock:
            return {
                key: [{**slot.fault.to_dict(), "remaining": slot.remaining} for slot in script]
                for key, script in self._scripts.items()
            }
