"""Micro-benchmark of OpenTelemetry tracing's cost per request (routing.gateway.tracing, docs/observability.md).

    python bench/micro_tracing.py
    python bench/micro_tracing.py --attempts 2     # a request that fell back once

Three figures for a tier-routed chat request with ``attempts`` upstream attempts, each the best of many short runs
(the cost without interference) with the median next to it:

- ``off``: what a request pays while tracing is off, the one ``tracing.active`` test at its end;
- ``on, request path``: ``tracing.emit`` - the traceparent read, the sampler, the spans built from the request's
  records, the queue append - on the event loop;
- ``on, exporter thread``: the protobuf encoding of the request's spans, in batches of 512 as the exporter sends
  them (off the request path, but on the same CPU).

The exporter here never sends (its schedule delay is longer than the run), so nothing else competes for the CPU.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import timeit
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gomodel_site.settings")
os.environ.setdefault("GOMODEL_DEMO", "true")  # the public fallback secret key: nothing here is served

import django

django.setup()  # before the gateway modules, which read the settings at import

from routing.config.otel_settings import tracing_config  # noqa: E402
from routing.core.answer import Answer, Usage  # noqa: E402
from routing.core.features import extract_features  # noqa: E402
from routing.core.outcome import AttemptOutcome, ErrorClass  # noqa: E402
from routing.core.table import ModelSpec, ProviderSpec, RoutingTable, TargetRef, TierRouteSpec, VirtualModelSpec  # noqa: E402
from routing.gateway import tracing  # noqa: E402
from routing.gateway.records import AttemptRecord, Call, Journey, Plan, SelectionRecord, TierDecision  # noqa: E402

BODY = {"model": "normal", "max_tokens": 200,
        "messages": [{"role": "system", "content": "You are a helpful support agent."},
                     {"role": "user", "content": "Hi, where is my order 48213? It was supposed to arrive on Tuesday."}]}


def request(attempts: int) -> tuple[Call, Journey]:
    """A finished tier-routed request: the records the gateway holds when it ends one."""
    table = RoutingTable.build(
        version=1,
        providers=[ProviderSpec("sim", "openai", "http://127.0.0.1:18001/v1"),
                   ProviderSpec("claude", "anthropic", "https://api.anthropic.com")],
        models=[ModelSpec("sim/instant", "sim", "instant", 0.15, 0.6), ModelSpec("claude/haiku", "claude", "haiku")],
        virtual_models=[VirtualModelSpec("normal-easy", "failover",
                                         (TargetRef("sim/instant"), TargetRef("claude/haiku")))],
        tier_routes=[TierRouteSpec("normal", "normal-easy", "normal-easy")],
    )
    call = Call(request_id="0123456789abcdef0123456789abcdef", inbound="openai", key=None, body=BODY,
                features=extract_features(BODY, "openai"), headers={"content-type": "application/json"}, table=table)
    journey = Journey(requested_model="normal", endpoint="openai", target_name="normal-easy",
                      tier=TierDecision("normal", "easy", "normal-easy", 1),
                      plan=Plan(records=[SelectionRecord("normal-easy", "failover", None, "sim/instant", "first")]),
                      usage=Usage(40, 25), cost=0.0000210, answer=Answer("Your order is on its way.", "stop"))
    for seq in range(1, attempts + 1):
        last = seq == attempts
        record = AttemptRecord(seq=seq, target="sim/instant" if seq == 1 else "claude/haiku",
                               provider="sim" if seq == 1 else "claude", started=call.started + 0.001 * seq)
        record.outcome = (AttemptOutcome.success(0.02) if last
                          else AttemptOutcome.failure(ErrorClass.TRANSIENT, "overloaded", status=503, latency_s=0.01))
        record.action = "accepted" if last else "fallback"
        record.usage = Usage(40, 25) if last else None
        journey.attempts.append(record)
    journey.answered_by = table.models[journey.attempts[-1].target]
    return call, journey


def best_and_median(runs: list[float], number: int) -> str:
    per_call = [run / number * 1e6 for run in runs]
    return f"{min(per_call):7.2f} {statistics.median(per_call):8.2f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--attempts", type=int, default=1)
    parser.add_argument("--number", type=int, default=2000, help="requests per run")
    parser.add_argument("--repeat", type=int, default=30, help="runs per case")
    args = parser.parse_args()
    call, journey = request(args.attempts)
    spans_per_request = 1 + args.attempts
    capacity = 2 * args.number * args.repeat * spans_per_request  # never full, never a batch to send
    config = tracing_config(lambda name: {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9",
                                          "OTEL_BSP_MAX_QUEUE_SIZE": str(capacity),
                                          "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": str(capacity),
                                          "OTEL_BSP_SCHEDULE_DELAY": "600000"}.get(name, ""))
    print(f"tracing cost of one tier-routed chat request with {args.attempts} attempt(s), {spans_per_request} spans "
          f"(best / median of {args.repeat} runs, microseconds)")
    off = timeit.repeat(lambda: tracing.emit(call, journey, 0.03) if tracing.active else None,
                        number=args.number, repeat=args.repeat)
    print(f"  off (tracing.active is False)            {best_and_median(off, args.number)}")
    tracing.start(config)
    exporter = tracing._exporter
    assert exporter is not None
    emit = timeit.repeat(lambda: tracing.emit(call, journey, 0.03), number=args.number, repeat=args.repeat)
    print(f"  on, request path (tracing.emit)          {best_and_median(emit, args.number)}")
    spans = list(exporter._queue)[:512 * 4]
    batches = [spans[i:i + 512] for i in range(0, len(spans), 512)]
    encode = exporter._encode
    runs = timeit.repeat(lambda: [encode(batch) for batch in batches], number=5, repeat=args.repeat)
    requests_encoded = len(spans) / spans_per_request * 5
    print(f"  on, exporter thread (protobuf encoding)  {best_and_median(runs, int(requests_encoded))}")
    size = sum(len(encode(batch)) for batch in batches) / (len(spans) / spans_per_request)
    print(f"  bytes per request on the wire (no gzip)  {size:7.0f}")
    tracing.shutdown(0.0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
