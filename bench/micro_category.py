"""Micro-benchmark: the cost of the content-category classifier (classify_category) on top of reading the body.

Run from the repository root: ``python bench/micro_category.py``. It prints the time per request of
``classify_category`` alone on the Features the tier classifier has read (the extra cost of a category route;
target <= 20 us on a typical chat request), for a typical chat request in English, German and Chinese, a
request whose keyword decides late (writing: the last category of precedence), an agent request, and latest
user messages of 1k to 32k characters; then extract_features + classify + classify_category together.
The case-folded text is shared with the tier classifier, so each round reads a fresh Features (the fold is
then paid once, as on the request path). Each figure is the fastest of 25 rounds of many calls.
"""

from __future__ import annotations

import sys
import time
import timeit
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from micro_classifier import PROSE, SYSTEM, agent_request, typical_chat

from routing.core.categories import classify_category
from routing.core.classifier import classify
from routing.core.features import Features, extract_features

GERMAN = ("Die Lieferung sollte am Dienstag kommen, aber die Sendungsverfolgung zeigt immer noch „unterwegs“. "
          "Kannst du nachsehen, was passiert ist, und ob ich sie diese Woche erwarten kann? Außerdem möchte ich "
          "die Lieferadresse für meine nächste Bestellung ändern, weil ich Ende des Monats umziehe. ")
CHINESE = ("我的订单本应在周二送达，但物流页面仍显示运输中。你能帮我查一下发生了什么，这周能否送到吗？"
           "另外我月底要搬家，想修改下一单的收货地址。")


def chat(text: str) -> dict[str, Any]:
    body = typical_chat()
    body["messages"][-1]["content"] = text
    return body


def per_call_us(work: Callable[[], object]) -> float:
    """Microseconds per call: the fastest of 25 rounds (others on a shared machine only ever add time)."""
    timer = timeit.Timer(work, timer=time.thread_time)
    number, _ = timer.autorange()
    number = max(1, number // 10)
    return min(timer.repeat(repeat=25, number=number)) / number * 1e6


def category_us(body: dict[str, Any], shape: Any = "openai") -> tuple[Features, float]:
    """classify_category alone, each call on a fresh copy of the Features (so the shared fold is paid)."""
    features = extract_features(body, shape)
    fields = dict(features.__dict__)

    def fresh() -> Features:
        copy = object.__new__(Features)
        object.__setattr__(copy, "__dict__", dict(fields))
        return copy

    base = per_call_us(fresh)
    return features, max(0.0, per_call_us(lambda: classify_category(fresh())) - base)


def main() -> None:
    print(f"python {sys.version.split()[0]}, classify_category alone (fresh Features each call), fastest of 25\n")
    cases: list[tuple[str, dict[str, Any], Any, bool]] = [
        ("typical chat request, English", typical_chat(), "openai", True),
        ("typical chat request, German", chat(GERMAN), "openai", False),
        ("typical chat request, Chinese", chat(CHINESE), "openai", False),
        ("chat asking for a poem (writing)", chat(PROSE + " Please write a short poem about it."), "openai", False),
        ("agent request, 12 tools", agent_request(), "anthropic", False),
    ]
    for label, body, shape, budget in cases:
        features, us = category_us(body, shape)
        verdict = classify_category(features).category
        target = f"   target <= 20 us   {'ok' if us <= 20 else 'OVER'}" if budget else ""
        print(f"{label:<36} {features.total_chars:>6,} chars  {verdict:<8} {us:7.1f} us{target}")
    print(f"\n{'latest user message':>20} {'us/request':>11} {'us per 1k chars':>16}")
    for size in (1_000, 8_000, 32_000):
        text = (PROSE * (size // len(PROSE) + 1))[:size]
        _, us = category_us({"messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": text}]})
        print(f"{size:>20,} {us:>11.1f} {us / size * 1000:>16.2f}")
    body = typical_chat()

    def both() -> None:
        features = extract_features(body, "openai")
        classify(features)
        classify_category(features)

    tier_only = per_call_us(lambda: classify(extract_features(body, "openai")))
    together = per_call_us(both)
    print(f"\ntypical chat: extract_features + classify {tier_only:.1f} us; with classify_category {together:.1f} us")
    print(f"\nmeasured at {time.strftime('%Y-%m-%d %H:%M:%S')}")


if __name__ == "__main__":
    main()
