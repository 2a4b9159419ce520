"""Micro-benchmark: the gateway's CPU per streamed answer, from upstream bytes to the frames sent to the client.

    python bench/micro_stream.py              # print the table
    python bench/micro_stream.py --repeat 5   # fewer runs

The upstream bytes are the simulator's own (``routing/simulator``'s wire formats render them from the request
the gateway's adapter builds), for the benchmark's ``instant`` model: a 20-chunk answer to the benchmark's
chat request, with the usage chunk the gateway asks for. They are fed to the translator the gateway picks
for the pair of formats, cut three ways: in one read (the instant simulator writes the whole stream at once
and loopback delivers it whole), in 1,448-byte reads (TCP segments over Ethernet), and one upstream event
per read (a provider that paces its chunks). Each stream runs what the gateway runs for it: the frame loop
of ``routing/gateway/client_answer.py`` (translator, accumulator) as an async generator, the relay handler's
``_send`` with an ASGI ``send`` that only counts, then usage, cost and the answer's validation. The ``json``
row is the same answer as one JSON body through the adapter's ``parse_response``, validation and the client
body's encoding: the stream's overhead is the difference.

Each figure is the median of several runs of many streams (the minimum beside it), in CPU time of the
benchmark's thread (``time.thread_time``), so that other work on a busy machine does not count; per event
divides by the upstream's data events.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")

import django

django.setup()

from harness.configs import CHUNKS, QUESTION, SYSTEM_PROMPT, chat_body, simulator_config  # noqa: E402

from routing.api.relay_handler import _send  # noqa: E402
from routing.core.answer import Usage  # noqa: E402
from routing.core.table import ModelSpec  # noqa: E402
from routing.core.validate import ValidationRules, validate_answer  # noqa: E402
from routing.gateway.attempt import model_cost  # noqa: E402
from routing.gateway.client_answer import RelayStream  # noqa: E402
from routing.providers import StreamTranslator, get_adapter  # noqa: E402
from routing.providers.base import client_wants_usage  # noqa: E402
from routing.providers.errors import Inbound  # noqa: E402
from routing.schema.engine import validate_instance  # noqa: E402
from routing.simulator.compose import compose_reply  # noqa: E402
from routing.simulator.config import load_config  # noqa: E402
from routing.simulator.wire.anthropic import AnthropicWire  # noqa: E402
from routing.simulator.wire.base import RenderContext, WireFormat  # noqa: E402
from routing.simulator.wire.openai import OpenAIWire  # noqa: E402

SIM_MODEL = "instant"
SEGMENT_BYTES = 1448  # TCP payload of one Ethernet frame
REQUEST_TOKEN = "0123456789abcdef01234567"  # the simulator's per-request id (response and call ids)
WIRES: dict[str, WireFormat] = {"openai": OpenAIWire(), "anthropic": AnthropicWire()}


@dataclass(frozen=True)
class Case:
    label: str
    inbound: Inbound
    provider: str  # provider kind: the upstream's wire format

    @property
    def model(self) -> ModelSpec:
        return ModelSpec(name=f"sim/{SIM_MODEL}", provider="sim", upstream=SIM_MODEL, input_price=0.15,
                         output_price=0.60, context_window=128_000)


CASES = (
    Case("openai client, openai provider (pass-through)", "openai", "openai"),
    Case("anthropic client, openai provider (translation)", "anthropic", "openai"),
    Case("anthropic client, anthropic provider (pass-through)", "anthropic", "anthropic"),
    Case("openai client, anthropic provider (translation)", "openai", "anthropic"),
)


# The two rows the harness picks out (bench/harness/micro.py), the instant simulator's case: one read.
SUMMARY = {CASES[0].label: "pass-through stream", CASES[1].label: "translated stream"}


def client_body(inbound: Inbound, *, stream: bool) -> dict[str, Any]:
    """The benchmark's chat request in the client's own format."""
    if inbound == "openai":
        return chat_body(SIM_MODEL, stream=stream)
    body: dict[str, Any] = {"model": SIM_MODEL, "max_tokens": 256, "system": SYSTEM_PROMPT,
                            "messages": [{"role": "user", "content": QUESTION}]}
    if stream:
        body["stream"] = True
    return body


def simulator_answer(case: Case, *, stream: bool) -> bytes:
    """The simulator's bytes for the request the gateway sends upstream in ``case``."""
    adapter = get_adapter(case.provider)
    body = client_body(case.inbound, stream=stream)
    payload = adapter.payload(model=case.model, body=body, inbound=case.inbound, stream=stream)
    payload = json.loads(json.dumps(payload))  # as the simulator receives it
    behaviour = load_config(simulator_config(slow_stream_chunks=4)).behaviour_for(SIM_MODEL)
    if behaviour is None:
        raise RuntimeError(f"the benchmark's simulator config has no model {SIM_MODEL!r}")
    wire = WIRES[case.provider]
    prompt = wire.parse(payload, SIM_MODEL)
    reply = compose_reply(prompt, behaviour, counter=1)
    ctx = RenderContext(model=SIM_MODEL, token=REQUEST_TOKEN, created=1_764_547_200,
                        chunks=behaviour.chunk_count)
    if not stream:
        return wire.render_json(ctx, prompt, reply)
    rendered = wire.render_stream(ctx, prompt, reply)
    return rendered.opening + b"".join(rendered.paced) + rendered.closing


def pieces(stream: bytes, cut: str) -> list[bytes]:
    if cut == "one read":
        return [stream]
    if cut == "1448-byte reads":
        return [stream[i : i + SEGMENT_BYTES] for i in range(0, len(stream), SEGMENT_BYTES)]
    events = stream.split(b"\n\n")
    return [event + b"\n\n" for event in events[:-1]]


def data_events(stream: bytes) -> int:
    return sum(1 for block in stream.split(b"\n\n") if b"data:" in block)


async def _upstream(reads: list[bytes]) -> AsyncIterator[bytes]:
    for read in reads:
        yield read


async def _frames(translator: StreamTranslator, reads: list[bytes]) -> AsyncIterator[bytes]:
    """The per-read part of ``responses.stream_response``'s frame loop."""
    async for chunk in _upstream(reads):
        frames_of_read = translator.feed(chunk)
        if frames_of_read:
            yield b"".join(frames_of_read)
    last_frames = translator.finish()
    if last_frames:
        yield b"".join(last_frames)


class _CountingSend:
    __slots__ = ("messages", "size")

    def __init__(self) -> None:
        self.messages = 0
        self.size = 0

    async def __call__(self, message: dict[str, Any]) -> None:
        self.messages += 1
        self.size += len(message.get("body", b""))


def one_stream(case: Case, reads: list[bytes]) -> Callable[[], Awaitable[int]]:
    adapter = get_adapter(case.provider)
    body = client_body(case.inbound, stream=True)
    wants_usage = client_wants_usage(case.inbound, body)
    model = case.model
    rules = ValidationRules()

    async def run() -> int:
        translator = adapter.stream_translator(inbound=case.inbound, public_model=model.name,
                                               client_wants_usage=wants_usage, created=1_764_547_200)
        send = _CountingSend()
        await _send(RelayStream(_frames(translator, reads), content_type="text/event-stream"), send)
        if not translator.complete:
            raise RuntimeError(f"{case.label}: the stream did not complete")
        usage = translator.usage
        model_cost(model, usage)
        verdict = validate_answer(translator.answer, rules, schema_validator=validate_instance)
        if not verdict.ok or usage == Usage():
            raise RuntimeError(f"{case.label}: the answer was not accepted or had no usage")
        return send.messages

    return run


def one_json(case: Case, data: bytes) -> Callable[[], int]:
    adapter = get_adapter(case.provider)
    model = case.model
    rules = ValidationRules()

    def run() -> int:
        parsed = adapter.parse_response(status=200, data=data, inbound=case.inbound, public_model=model.name)
        model_cost(model, parsed.usage)
        if not validate_answer(parsed.answer, rules, schema_validator=validate_instance).ok:
            raise RuntimeError(f"{case.label}: the JSON answer was not accepted")
        json.dumps(parsed.client_body, ensure_ascii=False, separators=(",", ":")).encode()
        return 1

    return run


def time_runs(run: Callable[[], Any], *, number: int, repeat: int) -> tuple[float, float]:
    """(median, best) microseconds of CPU per call; a coroutine function runs ``number`` times in one event
    loop."""
    loop = asyncio.new_event_loop()
    is_async = asyncio.iscoroutinefunction(run)

    async def many() -> None:
        for _ in range(number):
            await run()

    def batch() -> None:
        if is_async:
            loop.run_until_complete(many())
        else:
            for _ in range(number):
                run()

    batch()
    per_call = []
    for _ in range(repeat):
        started = time.thread_time()
        batch()
        per_call.append((time.thread_time() - started) / number * 1e6)
    loop.close()
    return statistics.median(per_call), min(per_call)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--number", type=int, default=300, help="streams per run")
    parser.add_argument("--repeat", type=int, default=15, help="runs per row")
    args = parser.parse_args()

    print(f"one streamed answer of {CHUNKS} content chunks (median / best of {args.repeat} runs of "
          f"{args.number}, microseconds)")
    header = f"  {'case':<52}  {'reads':<16} {'events':>6} {'sends':>5} {'per stream':>10} {'best':>7} " \
             f"{'per event':>9} {'vs json':>8}"
    print(header)
    summary = []
    for case in CASES:
        stream = simulator_answer(case, stream=True)
        events = data_events(stream)
        json_us, json_best = time_runs(one_json(case, simulator_answer(case, stream=False)),
                                       number=args.number, repeat=args.repeat)
        print(f"  {case.label:<52}  {'json':<16} {'':>6} {'':>5} {json_us:10.1f} {json_best:7.1f}")
        for cut in ("one read", "1448-byte reads", "event per read"):
            run = one_stream(case, pieces(stream, cut))
            sends = asyncio.run(run())
            median, best = time_runs(run, number=args.number, repeat=args.repeat)
            print(f"  {'':<52}  {cut:<16} {events:>6} {sends:>5} {median:10.1f} {best:7.1f} "
                  f"{median / events:9.2f} {median - json_us:+8.1f}")
            if cut == "one read" and case.label in SUMMARY:
                summary.append(f"{SUMMARY[case.label]}: {median:.1f} us per stream, {median / events:.2f} us per "
                               f"event, {median - json_us:+.1f} us over json")
    print("\n".join(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
