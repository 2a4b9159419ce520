"""Which requests are traced: the OpenTelemetry samplers ``OTEL_TRACES_SAMPLER`` names, with their argument.

The decision is the SDK's: ``traceidratio`` keeps a trace when the low 64 bits of its id fall below
``ratio * 2**64`` (so every service sampling at the same ratio keeps the same traces), and the ``parentbased_*``
samplers follow a client's ``traceparent`` sampled flag and fall back to their root sampler without one.
"""

from __future__ import annotations

from dataclasses import dataclass

from routing.core.trace_context import TraceParent

SAMPLERS = ("always_on", "always_off", "traceidratio", "parentbased_always_on", "parentbased_always_off",
            "parentbased_traceidratio")
DEFAULT_SAMPLER = "parentbased_always_on"
_LOW_64 = (1 << 64) - 1


@dataclass(frozen=True, slots=True)
class Sampler:
    name: str  # one of SAMPLERS
    ratio: float = 1.0  # the traceidratio samplers' share of traces kept, 0-1

    @staticmethod
    def parse(name: str, argument: str) -> Sampler:
        """The sampler ``OTEL_TRACES_SAMPLER`` and ``OTEL_TRACES_SAMPLER_ARG`` describe; ValueError saying why not."""
        name = (name.strip() or DEFAULT_SAMPLER).lower()
        if name not in SAMPLERS:
            raise ValueError(f"expected one of {', '.join(SAMPLERS)}, got {name!r}")
        if not name.endswith("traceidratio"):
            return Sampler(name)
        if not argument.strip():
            return Sampler(name, 1.0)
        try:
            ratio = float(argument)
        except ValueError:
            raise ValueError(f"expected a ratio between 0 and 1, got {argument!r}") from None
        if not 0.0 <= ratio <= 1.0:  # NaN fails both comparisons
            raise ValueError(f"expected a ratio between 0 and 1, got {argument!r}")
        return Sampler(name, ratio)

    def sampled(self, trace_id: bytes, parent: TraceParent | None) -> bool:
        """Whether the trace ``trace_id`` of a request whose client sent ``parent`` (None: none) is recorded."""
        name = self.name
        if name.startswith("parentbased_"):
            if parent is not None:
                return parent.sampled
            name = name[len("parentbased_"):]
        if name == "always_on":
            return True
        if name == "always_off":
            return False
        bound = round(self.ratio * (1 << 64))
        return int.from_bytes(trace_id, "big") & _LOW_64 < bound
