"""A provider simulator: a real HTTP server impersonating OpenAI, Azure OpenAI, Anthropic and Gemini.

Used by the demo, the test suites and the benchmarks. Answers are deterministic, usage is plausible,
and every way a provider fails can be scripted per model. See docs/simulator.md.

Public API::

    SimulatorServer(config=None, port=0)           # in-process, background thread; a context manager
    start_simulator_process(port=0, config=None)   # a child process (Popen-like handle)
    unused_loopback_url()                          # a URL whose connections are refused
    key_fingerprint(key)                           # the fingerprint recorded for a key
    SimulatorApp(config)                           # the bare ASGI application
    load_config(source), SimulatorConfig, ModelBehaviour, ConfigError, FaultError, FAULT_KINDS
"""

from routing.simulator.app import SimulatorApp
from routing.simulator.config import ConfigError, ModelBehaviour, SimulatorConfig, load_config
from routing.simulator.faults import FAULT_KINDS, FaultError
from routing.simulator.recorder import key_fingerprint
from routing.simulator.server import SimulatorProcess, SimulatorServer, start_simulator_process, unused_loopback_url

__all__ = [
    "FAULT_KINDS",
    "ConfigError",
    "FaultError",
    "ModelBehaviour",
    "SimulatorApp",
    "SimulatorConfig",
    "SimulatorProcess",
    "SimulatorServer",
    "key_fingerprint",
    "load_config",
    "start_simulator_process",
    "unused_loopback_url",
]
