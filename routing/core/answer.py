"""Usage and Answer: the provider-neutral view of a response that cost accounting and validation read.

Provider adapters fill these from any wire format (OpenAI, Anthropic, Gemini, JSON or a finished stream);
the validation pipeline and the cost calculation never look at a wire format themselves.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# Normalised finish reasons. Adapters map their provider's words onto these.
FINISH_STOP = "stop"  # natural end or a stop sequence
FINISH_LENGTH = "length"  # max tokens reached: the answer is truncated
FINISH_TOOL_CALLS = "tool_calls"
FINISH_CONTENT_FILTER = "content_filter"
FINISH_UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts of one response. ``input_tokens`` includes the cached ones; ``output_tokens`` the reasoning ones."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0  # read from the provider's prompt cache (priced at the cached-input price)
    cache_creation_tokens: int = 0  # written to the prompt cache (Anthropic); priced as input here
    reasoning_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True, slots=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # the JSON text exactly as the model produced it


@dataclass(frozen=True, slots=True)
class Answer:
    """The content of a response, as far as acceptance rules care (first choice only)."""

    text: str = ""
    finish_reason: str = FINISH_UNKNOWN
    tool_calls: tuple[ToolCall, ...] = field(default_factory=tuple)
    reasoning_text: str = ""


def cost_usd(
    usage: Usage,
    *,
    input_price: float | None,
    output_price: float | None,
    cached_input_price: float | None,
) -> float | None:
    """The cost of ``usage`` at prices in USD per 1M tokens, or None for an unpriced model.

    Cached input tokens are billed at the cached price (the input price when none is set); reasoning tokens
    are output tokens and billed as such (they are already inside ``output_tokens``).
    """
    if input_price is None and output_price is None:
        return None
    cached = min(usage.cached_input_tokens, usage.input_tokens)
    fresh_input = usage.input_tokens - cached
    cached_price = cached_input_price if cached_input_price is not None else (input_price or 0.0)
    total = (
        fresh_input * (input_price or 0.0)
        + cached * cached_price
        + usage.output_tokens * (output_price or 0.0)
    )
    return total / 1_000_000
