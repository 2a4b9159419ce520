"""The provider simulator as an import path for granian: ``granian --interface asgi harness.sim_asgi:app``.

``python -m routing.simulator`` serves it with uvicorn; the benchmark serves it with granian, the server the
gateway runs under, so the upstream's HTTP stack is a small and steady share of the machine and not what
sets the pace. The configuration file is named by ``BENCH_SIM_CONFIG``.
"""

from __future__ import annotations

import os

from routing.simulator.app import SimulatorApp

app = SimulatorApp(os.environ["BENCH_SIM_CONFIG"])
