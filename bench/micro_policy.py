"""Micro-benchmark of routing policies' pure decision (routing.core.policies) over one virtual model's targets.

    python bench/micro_policy.py              # 8 targets
    python bench/micro_policy.py --targets 16

A request under a policy pays this on top of the selector's pick (bench/micro_selector.py) at each virtual model
it resolves through; a request without a policy never reaches it. Each figure is the best of many short runs
(the cost without interference), the median next to it.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import timeit
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from routing.core.policies import PolicySpec, TargetFacts, apply_policy


def facts(count: int) -> tuple[TargetFacts, ...]:
    return tuple(TargetFacts(f"provider{i}/model", frozenset({"code"} if i % 2 else {"writing"}),
                             0.001 * (count - i), 0.1 + 0.05 * i, i != 1) for i in range(count))


POLICIES = {
    "cheap": PolicySpec("cheap", "cost"),
    "fast": PolicySpec("fast", "latency", max_latency_ms=300),
    "coder": PolicySpec("coder", "strength", strength="code"),
    "strict": PolicySpec("strict", "latency", max_latency_ms=1, fallback_to="tight"),
    "tight": PolicySpec("tight", "cost", max_cost_usd=1e-9, fallback_to="cheap"),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", type=int, default=8)
    parser.add_argument("--number", type=int, default=2000, help="decisions per run")
    parser.add_argument("--repeat", type=int, default=100, help="runs per case")
    args = parser.parse_args()
    pool = facts(args.targets)
    print(f"one policy decision over {args.targets} targets (best / median of {args.repeat} runs, microseconds)")
    for label, name in (("cost", "cheap"), ("latency, max_latency_ms", "fast"), ("strength", "coder"),
                        ("two fallback steps, then cost", "strict")):
        policy = POLICIES[name]
        runs = timeit.repeat(lambda p=policy: apply_policy(p, POLICIES, pool, virtual_model="vm"),  # type: ignore[misc]
                             number=args.number, repeat=args.repeat)
        per_call = [run / args.number * 1e6 for run in runs]
        print(f"  {label:<40} {min(per_call):6.2f} {statistics.median(per_call):7.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
