"""The simulator's configuration: per-model behaviour, defaults for other models, and initial faults.

Written as YAML (or JSON, or a dict in tests)::

    seed: 7                    # seeds the random generator used by fault probabilities
    strict_models: false       # true: models not listed below get the provider's 404
    record_limit: 10000        # how many received requests are kept for inspection
    defaults: {latency_ms: 0, chunk_count: 8}
    models:
      gpt-4o-mini: {latency_ms: 40, ttfb_ms: 15, chunk_interval_ms: 5, api_keys: [sk-one, sk-two],
                    input_price: 0.15, output_price: 0.60, context_window: 128000,
                    faults: [{kind: rate_limit, times: 2}]}
    faults:                    # keyed by model, Azure deployment, request path or "*"
      "/openai/deployments/prod/chat/completions": {kind: status, status: 503, times: 1}
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import yaml

from routing.simulator.faults import Fault, FaultError, parse_script


class ConfigError(ValueError):
    """A configuration that cannot be used; the message names the offending entry."""


@dataclass(frozen=True, slots=True)
class ModelBehaviour:
    """How one simulated model answers. Times in milliseconds, prices in USD per 1M tokens."""

    latency_ms: float = 0.0  # time to the complete answer (JSON) or to the last chunk (stream)
    ttfb_ms: float = 0.0  # time to the response headers and the first chunk
    chunk_count: int = 8  # content chunks per streamed answer (fewer when the answer is shorter)
    chunk_interval_ms: float | None = None  # None: spread the chunks over latency_ms
    input_price: float | None = None
    output_price: float | None = None
    cached_input_price: float | None = None
    context_window: int = 128_000  # prompts estimated above this get the provider's context error
    api_keys: tuple[str, ...] = ()  # empty: any key is accepted
    reply: str | None = None  # fixed answer text instead of the echo
    reply_tokens: int | None = None  # pad or cut the echo to about this many tokens
    cache_min_tokens: int = 1024  # shortest repeated prompt prefix reported as cached
    dimensions: int = 8  # the size of an embedding vector, unless the request asks for another

    def answer_delay_s(self) -> float:
        """Seconds before a non-streamed answer is sent."""
        return max(self.latency_ms, self.ttfb_ms) / 1000.0

    def chunk_interval_s(self, chunks: int) -> float:
        """Seconds between two streamed content chunks, for a stream of ``chunks`` chunks."""
        if self.chunk_interval_ms is not None:
            return self.chunk_interval_ms / 1000.0
        if chunks <= 1:
            return 0.0
        return max(0.0, self.latency_ms - self.ttfb_ms) / 1000.0 / (chunks - 1)

    def cost_usd(self, *, input_tokens: int, cached_tokens: int, output_tokens: int) -> float | None:
        """The price of one answer, or None when the model has no prices configured."""
        if self.input_price is None and self.output_price is None:
            return None
        input_price = self.input_price or 0.0
        cached_price = self.cached_input_price if self.cached_input_price is not None else input_price
        cached = min(cached_tokens, input_tokens)
        total = (input_tokens - cached) * input_price + cached * cached_price
        total += output_tokens * (self.output_price or 0.0)
        return total / 1_000_000


@dataclass(frozen=True, slots=True)
class SimulatorConfig:
    defaults: ModelBehaviour = field(default_factory=ModelBehaviour)
    models: Mapping[str, ModelBehaviour] = field(default_factory=dict)
    faults: Mapping[str, tuple[Fault, ...]] = field(default_factory=dict)
    strict_models: bool = False
    seed: int = 0
    record_limit: int = 10_000

    def behaviour_for(self, model: str) -> ModelBehaviour | None:
        """The model's behaviour; the defaults for an unlisted model, or None when models are strict."""
        behaviour = self.models.get(model)
        if behaviour is not None:
            return behaviour
        return None if self.strict_models else self.defaults


_BEHAVIOUR_FIELDS = {f.name for f in fields(ModelBehaviour)}
_TOP_LEVEL = {"defaults", "models", "faults", "strict_models", "seed", "record_limit"}


def load_config(source: SimulatorConfig | Mapping[str, Any] | str | Path | None = None,
                *, latency_ms: float | None = None) -> SimulatorConfig:
    """A SimulatorConfig from a config object, a dict, or a YAML/JSON file path (None: all defaults).

    ``latency_ms`` (the ``--latency-ms`` command-line flag) replaces the default latency, so every model
    that does not set its own ``latency_ms`` gets it.
    """
    if latency_ms is not None and latency_ms < 0:
        raise ConfigError(f"latency_ms: expected a number >= 0, got {latency_ms!r}")
    if isinstance(source, SimulatorConfig):
        if latency_ms is None:
            return source
        return replace(source, defaults=replace(source.defaults, latency_ms=float(latency_ms)))
    data: Mapping[str, Any]
    if source is None:
        data = {}
    elif isinstance(source, Mapping):
        data = source
    else:
        data = _read_file(Path(source))
    if latency_ms is not None:
        defaults = data.get("defaults") or {}
        if not isinstance(defaults, Mapping):
            raise ConfigError("defaults: expected a mapping of settings")
        data = {**data, "defaults": {**defaults, "latency_ms": latency_ms}}
    return parse_config(data)


def _read_file(path: Path) -> Mapping[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the file ({exc.strerror})") from exc
    try:
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (yaml.YAMLError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{path}: not valid YAML/JSON ({exc})") from exc
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise ConfigError(f"{path}: the top level must be a mapping")
    return data


def parse_config(data: Mapping[str, Any]) -> SimulatorConfig:
    """A validated SimulatorConfig from its dict form; raises ConfigError naming the entry."""
    unknown = set(data) - _TOP_LEVEL
    if unknown:
        raise ConfigError(f"{sorted(unknown)[0]}: unknown setting (known: {', '.join(sorted(_TOP_LEVEL))})")
    defaults, default_faults = _parse_behaviour(data.get("defaults") or {}, "defaults", ModelBehaviour())
    if default_faults:
        raise ConfigError("defaults.faults: faults belong to a model or the top-level 'faults' mapping")
    models: dict[str, ModelBehaviour] = {}
    faults: dict[str, tuple[Fault, ...]] = {}
    raw_models = data.get("models") or {}
    if not isinstance(raw_models, Mapping):
        raise ConfigError("models: expected a mapping of model name to settings")
    for name, raw in raw_models.items():
        behaviour, model_faults = _parse_behaviour(raw or {}, f"models.{name}", defaults)
        models[str(name)] = behaviour
        if model_faults:
            faults[str(name)] = model_faults
    raw_faults = data.get("faults") or {}
    if not isinstance(raw_faults, Mapping):
        raise ConfigError("faults: expected a mapping of model, deployment or path to a fault or a list")
    for key, raw in raw_faults.items():
        try:
            faults[str(key)] = parse_script(raw, f"faults.{key}")
        except FaultError as exc:
            raise ConfigError(str(exc)) from exc
    return SimulatorConfig(
        defaults=defaults,
        models=models,
        faults=faults,
        strict_models=_boolean(data.get("strict_models", False), "strict_models"),
        seed=_integer(data.get("seed", 0), "seed", minimum=None),
        record_limit=_integer(data.get("record_limit", 10_000), "record_limit", minimum=1),
    )


def _parse_behaviour(raw: Any, where: str, base: ModelBehaviour) -> tuple[ModelBehaviour, tuple[Fault, ...]]:
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: expected a mapping of settings, got {type(raw).__name__}")
    values: dict[str, Any] = {}
    script: tuple[Fault, ...] = ()
    for name, value in raw.items():
        path = f"{where}.{name}"
        if name in ("faults", "fault"):
            try:
                script = parse_script(value, path)
            except FaultError as exc:
                raise ConfigError(str(exc)) from exc
        elif name not in _BEHAVIOUR_FIELDS:
            raise ConfigError(f"{path}: unknown setting (known: {', '.join(sorted(_BEHAVIOUR_FIELDS))}, faults)")
        else:
            values[name] = _behaviour_value(name, value, path)
    return replace(base, **values), script


def _behaviour_value(name: str, value: Any, path: str) -> Any:
    if name in ("chunk_count", "context_window", "cache_min_tokens", "dimensions"):
        return _integer(value, path, minimum=1)
    if name == "reply_tokens":
        return None if value is None else _integer(value, path, minimum=1)
    if name == "api_keys":
        if isinstance(value, str) or not isinstance(value, list | tuple):
            raise ConfigError(f"{path}: expected a list of key strings")
        if not all(isinstance(key, str) and key for key in value):
            raise ConfigError(f"{path}: every key must be a non-empty string")
        return tuple(value)
    if name == "reply":
        if value is not None and not isinstance(value, str):
            raise ConfigError(f"{path}: expected a string, got {value!r}")
        return value
    # Times and prices: non-negative numbers; prices and the chunk interval may be null.
    if value is None and name in ("chunk_interval_ms", "input_price", "output_price", "cached_input_price"):
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise ConfigError(f"{path}: expected a number >= 0, got {value!r}")
    return float(value)


def _integer(value: Any, path: str, *, minimum: int | None) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or (minimum is not None and value < minimum):
        bound = f" >= {minimum}" if minimum is not None else ""
        raise ConfigError(f"{path}: expected an integer{bound}, got {value!r}")
    return value


def _boolean(value: Any, path: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{path}: expected true or false, got {value!r}")
    return value
