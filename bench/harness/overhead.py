"""The stream's extra cost over a JSON request, counted in CPU instructions (valgrind's callgrind).

    python bench/harness/overhead.py drive BODY REQUESTS   # run by measure(), under valgrind

CPU time per request under load moves by 0.1-0.2 ms between two runs of the same code on a small shared machine,
as much as the difference between a streamed and a JSON answer. An instruction count does not move with the
neighbours: ``measure`` runs the gateway's ASGI application in one process (no HTTP server; the real
simulator over HTTP; 10 requests in flight) once for a few requests and once for many more, under callgrind,
for the JSON and the streamed form of the same request. The difference between the two counts, divided by the
extra requests, is the instructions of one request with start-up and warm-up cancelled out.

Each thread is counted apart. A stream's own work (reading the upstream's events, the frame loop, the sends)
runs on the event loop's thread; the other threads (the audit publisher and the database thread) do much the
same work for either form, but they batch it, and their share of a request moves by ±60k instructions between
two runs of the same code. The summary gives the whole difference (every thread) as the stream's extra, with the
event loop thread's part beside it, and states the extra as a share of a whole JSON request, which it turns into
milliseconds at the CPU a JSON request took in the load rows of the same run.
"""

from __future__ import annotations

import asyncio
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
REPO = HERE.parents[2]
FEW, MANY = 50, 250  # requests measured in the two runs; their difference is what counts


@dataclass
class Overhead:
    json_instructions: int  # per request, every thread of the process
    stream_instructions: int
    json_loop_instructions: int  # per request, the event loop's thread
    stream_loop_instructions: int
    requests: int  # the extra requests the differences cover

    @property
    def extra(self) -> int:
        """The stream's extra instructions, every thread."""
        return self.stream_instructions - self.json_instructions

    @property
    def loop_extra(self) -> int:
        """The part of ``extra`` on the event loop's thread, where the stream's own work runs."""
        return self.stream_loop_instructions - self.json_loop_instructions

    @property
    def share(self) -> float:
        """The stream's extra instructions as a share of a whole JSON request's."""
        return self.extra / self.json_instructions

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "extra": self.extra, "loop_extra": self.loop_extra, "share": round(self.share, 4)}


def valgrind_path() -> str | None:
    return shutil.which("valgrind")


def _instructions(env: Mapping[str, str], body: str, requests: int) -> tuple[int, int]:
    """Instructions of one driver run: every thread's, and the event loop's (the main thread, callgrind's 1)."""
    with tempfile.TemporaryDirectory(prefix="gomodel-callgrind-") as out:
        done = subprocess.run(
            ["valgrind", "--tool=callgrind", "--separate-threads=yes", f"--callgrind-out-file={out}/cg.out",
             sys.executable, str(HERE), "drive", body, str(requests)],
            cwd=REPO, env=dict(env), capture_output=True, text=True, timeout=1800, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"callgrind failed (exit {done.returncode}): {done.stderr.strip()[-1500:]}")
        per_thread = {}
        for path in Path(out).glob("cg.out-*"):
            text = path.read_text(errors="replace")
            thread, total = re.search(r"^thread: (\d+)$", text, re.M), re.search(r"^summary: (\d+)$", text, re.M)
            if thread is None or total is None:
                raise RuntimeError(f"callgrind wrote no summary to {path.name}")
            per_thread[int(thread.group(1))] = int(total.group(1))
    if 1 not in per_thread:
        raise RuntimeError("callgrind counted no main thread")
    return sum(per_thread.values()), per_thread[1]


def measure(env: Mapping[str, str], json_body: str, stream_body: str) -> Overhead:
    """Instructions per request of each form (about five minutes on two cores)."""
    whole, loop = {}, {}
    for name, body in (("json", json_body), ("stream", stream_body)):
        few, many = _instructions(env, body, FEW), _instructions(env, body, MANY)
        whole[name] = round((many[0] - few[0]) / (MANY - FEW))
        loop[name] = round((many[1] - few[1]) / (MANY - FEW))
    return Overhead(whole["json"], whole["stream"], loop["json"], loop["stream"], MANY - FEW)


def summary(overhead: Overhead, json_cpu_ms: float | None) -> str:
    text = (f"{overhead.json_instructions:,} instructions per JSON request, {overhead.stream_instructions:,} per "
            f"streamed one: +{overhead.extra:,} (+{100 * overhead.share:.1f}%), +{overhead.loop_extra:,} of it on the "
            f"event loop's thread")
    if json_cpu_ms is not None:
        text += (f"; at the {json_cpu_ms:.3f} ms of gateway CPU a JSON request took in the load rows, a stream's "
                 f"overhead is +{json_cpu_ms * overhead.share:.3f} ms")
    return text


def _drive(body: bytes, requests: int) -> None:
    sys.path.insert(0, str(REPO))
    sys.path.insert(0, str(HERE.parents[1]))
    from gomodel_site.asgi import application
    from harness.inprocess import drive

    loop = asyncio.new_event_loop()
    loop.run_until_complete(drive(application, body, 100, 10))  # imports, pools, first estimates
    statuses = loop.run_until_complete(drive(application, body, requests, 10))
    if any(status != 200 for status in statuses):
        raise SystemExit(f"{sum(status != 200 for status in statuses)} requests failed")
    time.sleep(1.0)  # the audit publisher's flush of these requests is counted too


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] != "drive":
        raise SystemExit(__doc__)
    _drive(sys.argv[2].encode(), int(sys.argv[3]))
