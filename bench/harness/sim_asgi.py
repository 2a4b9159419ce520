"""The provider simulator as an import path for granian: ``granian --interface asgi harness.sim_asgi:app``.

``python -m routing.simulator`` serves it with uvicorn, which without httptools and uvloop (not installed
here) parses HTTP in pure Python: measured on the 2-core machine it answers ~600 requests/s, so the upstream
and not the gateway would set the pace. Under granian the same application answers ~3x more for less CPU.
The configuration file is named by ``BENCH_SIM_CONFIG``.
"""

from __future__ import annotations

import os

from routing.simulator.app import SimulatorApp

app = SimulatorApp(os.environ["BENCH_SIM_CONFIG"])
