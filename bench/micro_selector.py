"""Micro-benchmark: the cost of one target selection over 8 targets, per strategy.

    python bench/micro_selector.py            # print the table
    python bench/micro_selector.py --check    # also exit 1 when an adaptive pick costs more than 10 us

Each figure is the best of many short runs (the minimum is the cost without interference from other work on
the machine); the median is printed next to it. The targets look like production: every one measured past its
cold start, priced, some with attempts in flight, one cooling down, one half-open probing; the selector runs
with the gateway's default settings (1% exploration, cold start until 5 observations). One more case has two
targets still in cold start (a just-added pair).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import timeit
from collections.abc import Callable
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from routing.core.health import HealthConfig, TargetHealth
from routing.core.outcome import AttemptOutcome, ErrorClass
from routing.core.selector import Candidate, RoundRobinState, SelectorConfig, select
from routing.core.table import SettingsInForce

BUDGET_US = 10.0
NOW = 1_000.0


def build_candidates(count: int, *, unhealthy: bool, cold: int = 0) -> tuple[Candidate, ...]:
    """``count`` measured, priced targets; with ``unhealthy`` one is cooling and one is half-open; the last
    ``cold`` have a single latency sample (cold start)."""
    config = HealthConfig()
    healths = [TargetHealth(f"provider{index}/model", config) for index in range(count)]
    samples = SettingsInForce().cold_start_observations
    for index, health in enumerate(healths):
        for _ in range(1 if index >= count - cold else samples):
            health.record(AttemptOutcome.success(0.2 + 0.05 * index), NOW - 5.0)
        for _ in range(index % 3):
            health.begin(NOW - 1.0)
    if unhealthy and count >= 3:
        outage = AttemptOutcome(ok=False, error_class=ErrorClass.TRANSIENT, reason="rate_limited", status=429)
        healths[1].record(outage, NOW - 1.0)  # cooling for 30 s
        healths[2].record(outage, NOW - 40.0)  # past its cooldown: probing
    return tuple(Candidate(h.name, h, weight=1.0 + index % 2, price=1.0 + index) for index, h in enumerate(healths))


def time_pick(label: str, pick: Callable[[], object], *, number: int, repeat: int) -> tuple[str, float, float]:
    runs = timeit.repeat(pick, number=number, repeat=repeat)
    per_call = [run / number * 1e6 for run in runs]
    return label, min(per_call), statistics.median(per_call)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", type=int, default=8)
    parser.add_argument("--number", type=int, default=1_000, help="picks per run")
    parser.add_argument("--repeat", type=int, default=200, help="runs per strategy")
    parser.add_argument("--check", action="store_true", help=f"exit 1 if adaptive exceeds {BUDGET_US} us")
    args = parser.parse_args()

    rng = random.Random(7)
    config = SelectorConfig.from_settings(SettingsInForce())
    rows = []
    for unhealthy, cold in ((False, 0), (True, 0), (False, 2)):
        candidates = build_candidates(args.targets, unhealthy=unhealthy, cold=cold)
        suffix = ", 1 cooling + 1 probing" if unhealthy else ""
        cases: list[tuple[str, dict[str, str]]] = [
            (s, {}) for s in ("adaptive", "round_robin", "weighted", "failover", "cost")
        ]
        cases.append(("adaptive", {"session_target": candidates[0].name}))
        if cold:
            suffix, cases = f", {cold} in cold start", [("adaptive", {})]
        for strategy, extra in cases:
            label = strategy + (", session kept" if extra else "") + suffix
            pick = partial(
                select, strategy, candidates, now=NOW, rng=rng, config=config, rr_state=RoundRobinState(), **extra
            )
            rows.append(time_pick(label, pick, number=args.number, repeat=args.repeat))

    health = TargetHealth("provider/model", HealthConfig())
    clock = iter(range(10**9))

    def attempt() -> None:
        now = float(next(clock))
        health.begin(now)
        health.record(AttemptOutcome.success(0.3), now)
        health.end(now)

    rows.append(
        time_pick("health: begin + record + end of one attempt", attempt, number=args.number, repeat=args.repeat)
    )

    print(f"one selection over {args.targets} targets (best / median of {args.repeat} runs, microseconds)")
    width = max(len(label) for label, _, _ in rows)
    for label, best, median in rows:
        print(f"  {label:<{width}}  {best:6.2f}  {median:6.2f}")
    adaptive_best = max(best for label, best, _ in rows if label.startswith("adaptive"))  # the budgeted ones
    print(f"slowest adaptive case: {adaptive_best:.2f} us (budget {BUDGET_US:.0f} us)")
    if args.check and adaptive_best > BUDGET_US:
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
