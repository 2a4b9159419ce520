"""The simulator's mutable state: configuration, active faults, records, counters and the prompt cache.

Shared by the request path (on the server's event loop) and the control surface (the Python API from a
test thread, or the ``/_sim/`` endpoints); every part guards itself with a lock.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable
from typing import Any

from routing.simulator.config import ModelBehaviour, SimulatorConfig
from routing.simulator.faults import Fault, FaultBook, parse_script
from routing.simulator.prompt import Prompt
from routing.simulator.recorder import Recorder

_CACHE_STEP = 128  # OpenAI and Gemini report cached tokens in steps of 128


class PromptCache:
    """Prompt prefixes seen recently per model (bounded, least recently used dropped first)."""

    def __init__(self, capacity: int = 10_000) -> None:
        self._lock = threading.Lock()
        self._seen: OrderedDict[tuple[str, str], None] = OrderedDict()
        self._capacity = capacity

    def seen_before(self, model: str, prefix_key: str) -> bool:
        """True when this prefix was sent to this model before; remembers it either way."""
        entry = (model, prefix_key)
        with self._lock:
            if entry in self._seen:
                self._seen.move_to_end(entry)
                return True
            self._seen[entry] = None
            if len(self._seen) > self._capacity:
                self._seen.popitem(last=False)
            return False

    def clear(self) -> None:
        with self._lock:
            self._seen.clear()


class SimulatorState:
    def __init__(self, config: SimulatorConfig) -> None:
        self.config = config
        self.faults = FaultBook(config.seed)
        self.recorder = Recorder(config.record_limit)
        self.cache = PromptCache()
        self._counter_lock = threading.Lock()
        self._counters: dict[str, int] = {}
        self._install_configured_faults()

    def set_fault(self, key: str, fault: Any) -> tuple[Fault, ...]:
        """Replace the fault script for a model, deployment, path or ``"*"``; raises FaultError if invalid."""
        script = parse_script(fault)
        self.faults.set(key, script)
        return script

    def clear_faults(self, key: str | None = None) -> None:
        self.faults.clear(key)

    def next_count(self, model: str) -> int:
        """The 1-based number of this request among the requests answered for ``model``."""
        with self._counter_lock:
            count = self._counters.get(model, 0) + 1
            self._counters[model] = count
            return count

    def cached_input(self, prompt: Prompt, behaviour: ModelBehaviour, *, explicit_only: bool) -> tuple[int, int]:
        """(tokens read from the prompt cache, tokens written to it) for this request.

        A prefix (everything before the last message) of at least ``cache_min_tokens`` is cached on
        first sight and read on later requests to the same model. With ``explicit_only`` (Anthropic) only
        requests carrying ``cache_control`` use the cache, and the first one reports the write.
        """
        if prompt.prefix_key is None or (explicit_only and not prompt.explicit_cache):
            return 0, 0
        tokens = prompt.prefix_tokens
        if tokens < behaviour.cache_min_tokens:
            return 0, 0
        seen = self.cache.seen_before(prompt.model, prompt.prefix_key)
        if explicit_only:
            return (tokens, 0) if seen else (0, tokens)
        return ((tokens // _CACHE_STEP) * _CACHE_STEP if seen else 0), 0

    def reset(self) -> None:
        """Back to the state at start: configured faults only, no records, counters and cache empty."""
        self.faults.clear()
        self.faults.reseed()
        self._install_configured_faults()
        self.recorder.reset()
        self.cache.clear()
        with self._counter_lock:
            self._counters.clear()

    def _install_configured_faults(self) -> None:
        for key, script in self.config.faults.items():
            self.faults.set(key, script)

    def fault_keys(self, *candidates: str | None) -> Iterable[str]:
        """The fault keys of a request, most specific first, without blanks or repeats."""
        keys: list[str] = []
        for candidate in (*candidates, "*"):
            if candidate and candidate not in keys:
                keys.append(candidate)
        return keys
