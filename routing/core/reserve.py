"""What a request may cost at most (its reservation), and what an answer cut short probably cost.

A limited key's request is admitted against its tokens-per-minute and budget limits with a reservation held
from admission until settlement (``routing.core.limits``): its input estimate plus the output it may produce
(``max_tokens``, or the configured default when it sends none, times ``n``), and that at the dearest price of
the models the requested name can reach. Settlement replaces the reservation with the real usage, or, when the
provider's usage never arrived (the client hung up, the stream was cut), with ``estimate_cut_usage``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import NamedTuple

from routing.core.answer import Answer, Usage
from routing.core.features import CHARS_PER_TOKEN
from routing.core.limits import NANOS_PER_USD, Reservation


class Price(NamedTuple):
    """A model's prices in USD per million tokens (0 for an unpriced side)."""

    input: float
    output: float


def dearest_cost_nanos(prices: Iterable[Price], input_tokens: int, output_tokens: int) -> int:
    """The most ``input_tokens`` in and ``output_tokens`` out cost at any of ``prices``, in nano-dollars
    (rounded up: a reservation never holds less than the answer could cost)."""
    most = 0.0
    for price in prices:
        most = max(most, input_tokens * price.input + output_tokens * price.output)
    return math.ceil(most * NANOS_PER_USD / 1_000_000 - 1e-6) if most > 0 else 0


def output_allowance(max_output_tokens: int | None, n: int, default_output_tokens: int) -> int:
    """The output tokens a request may produce: ``max_tokens`` (or the default) for each of its ``n`` choices."""
    per_choice = max_output_tokens if max_output_tokens is not None and max_output_tokens > 0 else default_output_tokens
    return per_choice * max(1, n)


def reservation(*, input_tokens: int, output_tokens: int, prices: Iterable[Price], tokens: bool,
                money: bool) -> Reservation:
    """The reservation of a request estimated at ``input_tokens`` that may produce ``output_tokens``; only the
    dimensions some limit counts (``tokens`` for tpm, ``money`` for budgets) are worked out."""
    return Reservation(
        input_tokens + output_tokens if tokens else 0,
        dearest_cost_nanos(prices, input_tokens, output_tokens) if money else 0,
    )


def relayed_tokens(answer: Answer | None) -> int:
    """The output tokens behind what an answer's text, reasoning and tool calls hold so far, estimated at
    four characters a token (rounded up)."""
    if answer is None:
        return 0
    chars = len(answer.text) + len(answer.reasoning_text)
    for call in answer.tool_calls:
        chars += len(call.name) + len(call.arguments)
    return math.ceil(chars / CHARS_PER_TOKEN)


def estimate_cut_usage(reported: Usage | None, *, input_estimate: int, answer: Answer | None) -> Usage:
    """The usage of an answer whose provider's usage never arrived whole: what the provider did report (an
    Anthropic stream reports its input at the start), else the input estimate; and the larger of the reported
    output and the output relayed so far."""
    reported = reported or Usage()
    return Usage(
        input_tokens=reported.input_tokens or input_estimate,
        output_tokens=max(reported.output_tokens, relayed_tokens(answer)),
        cached_input_tokens=reported.cached_input_tokens,
        cache_creation_tokens=reported.cache_creation_tokens,
        reasoning_tokens=reported.reasoning_tokens,
    )
