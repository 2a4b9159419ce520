"""Run the simulator: in a background thread of the test process, in a child process, or in the foreground.

``SimulatorServer`` (thread) shares its state with the caller, so faults and records are plain method
calls; ``start_simulator_process`` (child process) is for tests that need the simulator outside the
test's interpreter, and is controlled through the ``/_sim/`` endpoints with the same method names.
"""

from __future__ import annotations

import json
import os
import select
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import uvicorn

from routing.simulator.app import SimulatorApp
from routing.simulator.config import SimulatorConfig, load_config

READY_PREFIX = "simulator listening on "


class _Server(uvicorn.Server):
    """uvicorn's server, ending every held simulator request as soon as shutdown begins."""

    def __init__(self, config: uvicorn.Config, app: SimulatorApp) -> None:
        super().__init__(config)
        self._simulator = app

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self._simulator.close()
        await super().shutdown(sockets=sockets)


def uvicorn_config(app: SimulatorApp, *, configure_logging: bool) -> uvicorn.Config:
    """uvicorn settings for many connections and little overhead (httptools and uvloop when installed).

    Inside another program (``configure_logging=False``) uvicorn leaves the logging setup alone and its
    warnings reach the host's handlers (pytest's, in tests).
    """
    return uvicorn.Config(
        app,
        log_config=uvicorn.config.LOGGING_CONFIG if configure_logging else None,
        http="auto",
        loop="auto",
        lifespan="on",
        ws="none",
        interface="asgi3",
        log_level="warning",
        access_log=False,
        backlog=4096,
        # Longer than any client pool keeps an idle connection, so the simulator never closes one just
        # as a client reuses it (which a client would see as a spurious connection error).
        timeout_keep_alive=75,
        timeout_graceful_shutdown=2,
    )


def bind_socket(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP explicitly: asyncio disables Nagle's algorithm only on sockets that say they are TCP, and
    # with Nagle on, a response written as headers then body stalls 40 ms on the client's delayed ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.set_inheritable(True)
    return sock


def _url(host: str, port: int) -> str:
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def unused_loopback_url() -> str:
    """The URL of a loopback port nothing listens on: connecting to it is refused (ECONNREFUSED)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return _url("127.0.0.1", port)


class SimulatorServer:
    """The simulator on a loopback port, served by uvicorn in a background thread.

    Use as a context manager (``with SimulatorServer(config) as sim: ... sim.base_url``) or call
    :meth:`start` and :meth:`stop`. ``port=0`` picks a free port.
    """

    def __init__(self, config: SimulatorConfig | Mapping[str, Any] | str | Path | None = None, port: int = 0,
                 host: str = "127.0.0.1") -> None:
        self.app = SimulatorApp(load_config(config))
        self.host = host
        self._requested_port = port
        self.port = port
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        return _url(self.host, self.port)

    def start(self, timeout: float = 10.0) -> SimulatorServer:
        if self._thread is not None:
            raise RuntimeError("the simulator is already running")
        sock = bind_socket(self.host, self._requested_port)
        self.port = sock.getsockname()[1]
        server = _Server(uvicorn_config(self.app, configure_logging=False), self.app)
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name=f"simulator:{self.port}",
                                  daemon=True)
        thread.start()
        deadline = time.monotonic() + timeout
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                sock.close()
                raise RuntimeError(f"the simulator did not start on {self.base_url}")
            time.sleep(0.005)
        self._server, self._thread = server, thread
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Stop serving; held requests and open streams are dropped at once."""
        server, thread = self._server, self._thread
        if server is None or thread is None:
            return
        server.should_exit = True
        thread.join(timeout)
        if thread.is_alive():
            server.force_exit = True
            thread.join(timeout)
        self._server, self._thread = None, None

    def __enter__(self) -> SimulatorServer:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.stop()

    # -- control ------------------------------------------------------------------------------------

    def set_fault(self, model: str, fault: Mapping[str, Any] | Sequence[Mapping[str, Any]]) -> None:
        """Replace the fault script for a model, Azure deployment, request path or ``"*"``."""
        self.app.state.set_fault(model, fault)

    def clear_faults(self, model: str | None = None) -> None:
        self.app.state.clear_faults(model)

    def faults(self) -> dict[str, list[dict[str, Any]]]:
        return self.app.state.faults.snapshot()

    def received(self, model: str | None = None) -> list[dict[str, Any]]:
        """The recorded requests, oldest first, for ``model`` (name or Azure deployment) if given.

        A client can see the end of a response a moment before the simulator finishes its record; call
        :meth:`wait_until_idle` first when the outcome of the latest request matters.
        """
        return self.app.state.recorder.records(model)

    def wait_until_idle(self, timeout: float = 5.0) -> None:
        """Return once no request is in flight (every record is final); raises TimeoutError otherwise."""
        _wait_until_idle(self.stats, timeout)

    def stats(self) -> dict[str, Any]:
        return self.app.state.recorder.stats()

    def reset(self) -> None:
        """Back to the configured start: configured faults only, no records, counters and cache empty."""
        self.app.state.reset()


class SimulatorProcess:
    """A simulator running in a child process; Popen-like, with the control methods over HTTP."""

    def __init__(self, process: subprocess.Popen[str], host: str, port: int, config_file: str | None) -> None:
        self.process = process
        self.host = host
        self.port = port
        self._config_file = config_file

    @property
    def base_url(self) -> str:
        return _url(self.host, self.port)

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def returncode(self) -> int | None:
        return self.process.returncode

    def poll(self) -> int | None:
        return self.process.poll()

    def wait(self, timeout: float | None = None) -> int:
        return self.process.wait(timeout)

    def terminate(self) -> None:
        self.process.terminate()

    def kill(self) -> None:
        self.process.kill()

    def stop(self, timeout: float = 10.0) -> None:
        """Terminate the process (kill it if it does not exit within ``timeout``) and clean up."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout)
        if self.process.stdout is not None:
            self.process.stdout.close()
        if self._config_file is not None:
            Path(self._config_file).unlink(missing_ok=True)
            self._config_file = None

    def __enter__(self) -> SimulatorProcess:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.stop()

    # -- control over HTTP --------------------------------------------------------------------------

    def set_fault(self, model: str, fault: Mapping[str, Any] | Sequence[Mapping[str, Any]]) -> None:
        self._call("POST", "/_sim/faults", {"model": model, "fault": fault})

    def clear_faults(self, model: str | None = None) -> None:
        query = f"?{urllib.parse.urlencode({'model': model})}" if model else ""
        self._call("DELETE", f"/_sim/faults{query}")

    def received(self, model: str | None = None) -> list[dict[str, Any]]:
        query = f"?{urllib.parse.urlencode({'model': model})}" if model else ""
        return list(self._call("GET", f"/_sim/requests{query}")["requests"])

    def stats(self) -> dict[str, Any]:
        return dict(self._call("GET", "/_sim/stats"))

    def wait_until_idle(self, timeout: float = 5.0) -> None:
        _wait_until_idle(self.stats, timeout)

    def reset(self) -> None:
        self._call("POST", "/_sim/reset")

    def _call(self, method: str, path: str, payload: Any = None) -> Any:
        data = None if payload is None else json.dumps(payload).encode("utf-8")
        request = urllib.request.Request(self.base_url + path, data=data, method=method,
                                         headers={"content-type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())


def _wait_until_idle(stats: Callable[[], dict[str, Any]], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while stats()["in_flight"] > 0:
        if time.monotonic() > deadline:
            raise TimeoutError(f"the simulator still has requests in flight after {timeout} s")
        time.sleep(0.005)


def start_simulator_process(port: int = 0, config: SimulatorConfig | Mapping[str, Any] | str | Path | None = None,
                            *, host: str = "127.0.0.1", latency_ms: float | None = None,
                            ready_timeout: float = 20.0) -> SimulatorProcess:
    """Start ``python -m routing.simulator`` and wait until it listens; ``port=0`` picks a free port.

    ``config`` is a file path, or a dict written to a temporary file for the child (a SimulatorConfig
    object cannot cross the process boundary; pass its source instead).
    """
    if isinstance(config, SimulatorConfig):
        raise TypeError("pass the configuration as a dict or a file path to a simulator process")
    config_file: str | None = None
    arguments = [sys.executable, "-m", "routing.simulator", "--host", host, "--port", str(port)]
    if isinstance(config, Mapping):
        load_config(config)  # refuse a bad configuration here, with its message, not in the child
        handle, config_file = tempfile.mkstemp(prefix="simulator-", suffix=".json")
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            json.dump(config, file)
        arguments += ["--config", config_file]
    elif config is not None:
        arguments += ["--config", str(config)]
    if latency_ms is not None:
        arguments += ["--latency-ms", str(latency_ms)]
    project_root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [project_root, os.environ.get("PYTHONPATH")]))}
    process = subprocess.Popen(arguments, stdout=subprocess.PIPE, text=True, env=env)
    assert process.stdout is not None
    deadline = time.monotonic() + ready_timeout
    while True:
        remaining = deadline - time.monotonic()
        ready, _, _ = select.select([process.stdout], [], [], max(remaining, 0))
        line = process.stdout.readline() if ready else ""
        if line.startswith(READY_PREFIX):
            url = urllib.parse.urlsplit(line[len(READY_PREFIX):].strip())
            return SimulatorProcess(process, host, url.port or port, config_file)
        if not ready or (not line and process.poll() is not None) or remaining <= 0:
            process.kill()
            process.wait()
            process.stdout.close()
            if config_file is not None:
                Path(config_file).unlink(missing_ok=True)
            raise RuntimeError(f"the simulator process did not start (exit code {process.returncode})")


def serve(config: SimulatorConfig, host: str, port: int) -> None:
    """Serve in the foreground until SIGINT/SIGTERM; prints the ready line once listening."""
    app = SimulatorApp(config)
    sock = bind_socket(host, port)
    server = _Server(uvicorn_config(app, configure_logging=True), app)
    url = _url(host, sock.getsockname()[1])

    def announce() -> None:
        while not server.started and not server.should_exit:
            time.sleep(0.01)
        if server.started:
            print(f"{READY_PREFIX}{url}", flush=True)

    threading.Thread(target=announce, daemon=True).start()
    server.run(sockets=[sock])
