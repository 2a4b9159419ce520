"""The load generator: ``wrk`` (C, one thread, keep-alive connections) driven by a Lua script for POST bodies.

wrk costs a few microseconds of CPU per request, so on a 2-core machine it leaves the cores to the gateway
and the simulator; its own CPU time is measured for every run (``resource.getrusage`` of the finished
child) and reported next to the gateway's. Latency is measured by wrk from sending a request to the last
byte of its response, so for a stream it is the whole stream.
"""

from __future__ import annotations

import json
import resource
import shutil
import subprocess
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

RESULT_MARK = "BENCH_RESULT "

INSTALL_HINT = "wrk is not installed: run `apt-get install -y wrk` (Debian's package) and start again."

_DONE = r"""
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'BENCH_RESULT {"requests":%d,"duration_us":%d,"bytes":%d,"connect":%d,"read":%d,"write":%d,' ..
    '"status":%d,"timeout":%d,"p50_us":%d,"p90_us":%d,"p99_us":%d,"max_us":%d,"mean_us":%.1f}\n',
    summary.requests, summary.duration, summary.bytes, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max, latency.mean))
end
"""


def _lua_string(text: str) -> str:
    """A Lua long-bracket literal holding ``text`` verbatim."""
    level = "=" * 4
    assert f"]{level}]" not in text
    return f"[{level}[{text}]{level}]"


def fixed_body_script(body: str, headers: dict[str, str] | None = None) -> str:
    """Every request: POST the same JSON body (with ``headers`` besides the content type)."""
    # The spaces keep "[" and a long-bracket literal's "[====[" from reading as one "[[" bracket.
    extra = "".join(f"wrk.headers[ {_lua_string(name)} ] = {_lua_string(value)}\n"
                    for name, value in (headers or {}).items())
    return (
        'wrk.method = "POST"\n'
        'wrk.headers["Content-Type"] = "application/json"\n'
        + extra + f"wrk.body = {_lua_string(body)}\n" + _DONE
    )


def rotating_script(path: str, templates: list[str], first: int = 0, modulo: int = 0) -> str:
    """Requests rotate over ``templates``, ``%d`` replaced by a request counter starting after ``first``
    (taken modulo ``modulo`` when given, to cycle over a bounded set of values). (wrk runs for a duration:
    ``wrk.thread:stop()`` would end the thread's requests but not the run, which still lasts ``-d``.)"""
    lua_templates = ", ".join(_lua_string(t) for t in templates)
    return f"""
local templates = {{ {lua_templates} }}
local path = {_lua_string(path)}
local headers = {{ ["Content-Type"] = "application/json" }}
local sent = {first}
request = function()
  sent = sent + 1
  local template = templates[(sent % #templates) + 1]
  local value = sent
  if {modulo} > 0 then value = sent % {modulo} end
  return wrk.format("POST", path, headers, string.format(template, value))
end
""" + _DONE


@dataclass
class WrkResult:
    requests: int
    seconds: float
    rps: float
    p50_ms: float
    p90_ms: float
    p99_ms: float
    max_ms: float
    mean_ms: float
    errors: dict[str, int]
    bytes: int
    generator_cpu_s: float  # wrk's own utime + stime

    @property
    def error_count(self) -> int:
        return sum(self.errors.values())

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def wrk_path() -> str | None:
    return shutil.which("wrk")


def wrk_version() -> str:
    path = wrk_path()
    if path is None:
        return "missing"
    out = subprocess.run([path, "--version"], capture_output=True, text=True, check=False)
    text = (out.stdout or out.stderr).strip()
    return text.splitlines()[0].split(" Copyright")[0].strip() if text else "unknown"


def run_wrk(url: str, script: str, *, connections: int, seconds: float, timeout_s: float = 30.0) -> WrkResult:
    """Run wrk against ``url`` with ``connections`` keep-alive connections for ``seconds``; parse its result."""
    path = wrk_path()
    if path is None:
        raise RuntimeError(INSTALL_HINT)
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as handle:
        handle.write(script)
        script_path = Path(handle.name)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        completed = subprocess.run(
            [path, "-t1", f"-c{connections}", f"-d{max(1, round(seconds))}s", f"--timeout={timeout_s:g}s",
             "-s", str(script_path), url],
            capture_output=True, text=True, check=False, timeout=seconds + timeout_s + 30,
        )
    finally:
        script_path.unlink(missing_ok=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    line = next((ln for ln in completed.stdout.splitlines() if ln.startswith(RESULT_MARK)), None)
    if completed.returncode != 0 or line is None:
        raise RuntimeError(f"wrk failed (exit {completed.returncode}): {completed.stderr.strip()} "
                           f"{completed.stdout.strip()[-500:]}")
    raw = json.loads(line[len(RESULT_MARK):])
    duration = raw["duration_us"] / 1e6
    return WrkResult(
        requests=raw["requests"], seconds=round(duration, 3),
        rps=round(raw["requests"] / duration, 1) if duration else 0.0,
        p50_ms=raw["p50_us"] / 1000, p90_ms=raw["p90_us"] / 1000, p99_ms=raw["p99_us"] / 1000,
        max_ms=raw["max_us"] / 1000, mean_ms=round(raw["mean_us"] / 1000, 3),
        errors={k: raw[k] for k in ("connect", "read", "write", "status", "timeout") if raw[k]},
        bytes=raw["bytes"], generator_cpu_s=round(cpu, 3),
    )
