"""Run the micro-benchmarks (every ``bench/micro_*.py``) as child processes and pick out their key figures.

Each script keeps its own output format; the harness stores the full text and extracts the numbers the
issues set budgets for. A script added later runs too, with its printed output kept as is.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parents[1]

# Arguments per script: (full run, --quick run).
ARGUMENTS: dict[str, tuple[list[str], list[str]]] = {
    "micro_selector.py": (["--check"], ["--check", "--repeat", "50"]),
    "micro_publisher.py": ([], ["--events", "20000"]),
    "micro_stream.py": ([], ["--repeat", "5", "--number", "100"]),
}

# (name, pattern, budget in microseconds or None): the first group of the pattern is the figure.
FIGURES: dict[str, list[tuple[str, str, float | None]]] = {
    "micro_classifier.py": [
        ("typical chat request, us", r"typical chat request \([\d,]+ chars\)\s+([\d.]+) us", 20.0),
        ("32k chars over many turns, us", r"\s+3[12],\d{3} many turns\s+([\d.]+)", 1000.0),
        ("32k chars in one message, us", r"\s+3[12],\d{3} one user message\s+([\d.]+)", 1000.0),
        ("128k chars in one message, us", r"\s+12\d,\d{3} one user message\s+([\d.]+)", None),
    ],
    "micro_selector.py": [
        ("adaptive pick over 8 targets, us", r"^\s+adaptive\s+([\d.]+)", 10.0),
        ("slowest adaptive case, us", r"slowest adaptive case: ([\d.]+) us", 10.0),
    ],
    "micro_publisher.py": [
        ("publish() p50, us", r"p50 ([\d.]+) us", None),
        ("publish() p99, us", r"p99 ([\d.]+) us", 50.0),
    ],
    "micro_stream.py": [
        ("pass-through stream, us", r"^pass-through stream: ([\d.]+) us per stream", None),
        ("pass-through stream over json, us", r"^pass-through stream: .* ([+-][\d.]+) us over json", 150.0),
        ("translated stream, us", r"^translated stream: ([\d.]+) us per stream", None),
        ("translated stream over json, us", r"^translated stream: .* ([+-][\d.]+) us over json", 150.0),
    ],
}


@dataclass
class MicroResult:
    script: str
    argv: list[str]
    exit_code: int
    seconds: float
    output: str
    figures: dict[str, float] = field(default_factory=dict)
    budgets: dict[str, float] = field(default_factory=dict)


def run_micro_benchmarks(*, quick: bool, progress=print) -> list[MicroResult]:  # type: ignore[no-untyped-def]
    results = []
    for path in sorted(BENCH_DIR.glob("micro_*.py")):
        full, short = ARGUMENTS.get(path.name, ([], []))
        args = short if quick else full
        started = time.monotonic()
        completed = subprocess.run([sys.executable, str(path), *args], cwd=BENCH_DIR.parent, capture_output=True,
                                   text=True, check=False, timeout=600)
        output = completed.stdout + (f"\n[stderr]\n{completed.stderr}" if completed.stderr.strip() else "")
        result = MicroResult(path.name, args, completed.returncode, round(time.monotonic() - started, 1), output)
        for name, pattern, budget in FIGURES.get(path.name, []):
            match = re.search(pattern, completed.stdout, re.MULTILINE)
            if match:
                result.figures[name] = float(match.group(1).replace(",", ""))
                if budget is not None:
                    result.budgets[name] = budget
        progress(f"  {path.name}: exit {completed.returncode} in {result.seconds:.0f}s  "
                 + "  ".join(f"{k} {v:g}" for k, v in result.figures.items()))
        results.append(result)
    return results
