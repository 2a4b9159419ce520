"""TensorZero's gateway from its PyPI wheel: ``python tensorzero_gateway.py CONFIG ADDRESS_FILE``.

Run by the Python of TensorZero's own virtualenv (harness/reference_gateways.py). The wheel ships no gateway
binary: its native module embeds the gateway, and ``tensorzero._start_http_gateway`` (what the wheel's
``patch_openai_client`` calls) serves the OpenAI-compatible routes from it on 127.0.0.1 and a free port, on the
module's Tokio threads inside this process. Its base URL (``http://127.0.0.1:PORT/openai/v1``) goes to
ADDRESS_FILE once it listens; then the process waits for SIGTERM, which ends the gateway with it.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Any

from tensorzero import _start_http_gateway


def main(config_file: str, address_file: str) -> None:
    gateway: Any = _start_http_gateway(config_file=config_file, clickhouse_url=None, postgres_url=None,
                                       valkey_url=None, async_setup=False)
    written = Path(address_file + ".tmp")
    written.write_text(str(gateway.base_url).rstrip("/") + "\n")
    written.replace(address_file)  # whole or absent: the harness polls for it
    print(f"TensorZero gateway on {gateway.base_url}", flush=True)
    signal.sigwait({signal.SIGTERM, signal.SIGINT})
    gateway.close()


if __name__ == "__main__":
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})  # before the gateway's threads
    main(sys.argv[1], sys.argv[2])
