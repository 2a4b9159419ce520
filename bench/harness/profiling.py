"""Where a gateway worker's CPU goes: py-spy samples one worker under load and the stacks are summarised.

py-spy is a sampling profiler that attaches to a running process without restarting it (``--gil``: only
the thread holding the GIL is sampled, so the shares are shares of the worker's Python CPU time; granian's
own Rust threads are not in them). It is not a dependency of the project: install it beside the project
(``python3 -m venv var/bench-tools && var/bench-tools/bin/pip install py-spy``) or anywhere on PATH.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
INSTALL_HINT = ("py-spy not found: `python3 -m venv var/bench-tools && var/bench-tools/bin/pip install py-spy` "
                "(or put py-spy on PATH) to get a profile")

# Frames every stack passes through (server, event loop, thread start-up): they say nothing about the cost.
PLUMBING = re.compile(
    r"\((granian|click|multiprocessing)/|<module> \(granian|BaseEventLoop\.(run_forever|_run_once|run_until_complete)"
    r"|Handle\._run|Thread\._bootstrap|Thread\.run \(threading|_worker \(concurrent/futures/thread|^$"
)


def find_py_spy() -> str | None:
    local = REPO / "var" / "bench-tools" / "bin" / "py-spy"
    return shutil.which("py-spy") or (str(local) if local.exists() else None)


def start_recording(py_spy: str, pid: int, seconds: int, out_path: Path, rate: int = 200) -> subprocess.Popen[str]:
    """Start sampling ``pid`` for ``seconds`` in the background; stacks go to ``out_path`` (collapsed format)."""
    return subprocess.Popen(
        [py_spy, "record", "--pid", str(pid), "--duration", str(seconds), "--rate", str(rate), "--gil",
         "--function", "--nonblocking", "--format", "raw", "--output", str(out_path)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )


def _short(frame: str) -> str:
    return re.sub(r"\s+\(", " (", frame.strip())[:140]


def summarise(raw_path: Path, top: int = 30) -> dict[str, Any]:
    """Inclusive and self shares of the sampled frames, plumbing left out, largest first."""
    inclusive: Counter[str] = Counter()
    self_time: Counter[str] = Counter()
    total = 0
    for line in raw_path.read_text(errors="replace").splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not count_text.isdigit():
            continue
        count = int(count_text)
        total += count
        frames = [_short(f) for f in stack.split(";")]
        for frame in set(frames):
            if not PLUMBING.search(frame):
                inclusive[frame] += count
        self_time[frames[-1] if frames else "?"] += count
    if total == 0:
        return {"samples": 0, "inclusive": [], "self": []}
    return {
        "samples": total,
        "inclusive": [(round(100 * n / total, 1), f) for f, n in inclusive.most_common(top)],
        "self": [(round(100 * n / total, 1), f) for f, n in self_time.most_common(top // 2)],
    }
