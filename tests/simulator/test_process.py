"""The simulator as its own process: ``python -m routing.simulator`` and start_simulator_process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx2 as httpx
import pytest

from routing.simulator import ConfigError, start_simulator_process
from tests.simulator.wire_helpers import openai_body

ROOT = Path(__file__).resolve().parents[2]


def test_a_simulator_process_serves_and_is_controlled_over_http() -> None:
    config = {"models": {"gpt-proc": {"reply": "From another process."}}}
    with start_simulator_process(0, config) as sim, httpx.Client(base_url=sim.base_url) as http:
        sim.set_fault("gpt-proc", {"kind": "rate_limit", "times": 1})
        limited = http.post("/v1/chat/completions", json=openai_body(model="gpt-proc"))
        answered = http.post("/v1/chat/completions", json=openai_body(model="gpt-proc"))
        sim.wait_until_idle()
        records = sim.received("gpt-proc")
        stats = sim.stats()
        sim.reset()
        after_reset = sim.received()
        pid = sim.pid

    assert limited.status_code == 429
    assert answered.json()["choices"][0]["message"]["content"] == "From another process."
    assert [r["status"] for r in records] == [429, 200]
    assert stats["models"]["gpt-proc"]["requests"] == 2
    assert after_reset == []
    assert sim.poll() is not None
    assert pid > 0


def test_it_refuses_a_bad_configuration_before_starting_a_process() -> None:
    with pytest.raises(ConfigError, match="models.m.chunk_count"):
        start_simulator_process(0, {"models": {"m": {"chunk_count": 0}}})


def test_the_command_line_refuses_a_bad_file_with_a_message_and_no_traceback(tmp_path: Path) -> None:
    path = tmp_path / "sim.yaml"
    path.write_text("models:\n  m: {latency_ms: fast}\n", encoding="utf-8")

    result = subprocess.run([sys.executable, "-m", "routing.simulator", "--config", str(path), "--port", "0"],
                            capture_output=True, text=True, cwd=ROOT, timeout=30)

    assert result.returncode == 2
    assert "simulator: models.m.latency_ms: expected a number >= 0, got 'fast'" in result.stderr
    assert "Traceback" not in result.stderr


def test_the_command_line_says_when_the_port_is_taken() -> None:
    with start_simulator_process(0) as sim:
        result = subprocess.run([sys.executable, "-m", "routing.simulator", "--port", str(sim.port)],
                                capture_output=True, text=True, cwd=ROOT, timeout=30)

    assert result.returncode == 1
    assert f"cannot listen on 127.0.0.1:{sim.port}" in result.stderr
