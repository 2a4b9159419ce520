"""Token usage between the three wire formats and the neutral ``Usage``.

The formats disagree on what "input" means, and getting it wrong misprices every cached request:

- OpenAI ``prompt_tokens`` INCLUDES the cached tokens (``prompt_tokens_details.cached_tokens``) and the
  tokens written to the cache (``cache_write_tokens``); ``completion_tokens`` includes reasoning tokens.
- Anthropic ``input_tokens`` EXCLUDES both ``cache_read_input_tokens`` and ``cache_creation_input_tokens``:
  the total input is the sum of the three. ``output_tokens`` includes thinking tokens
  (``output_tokens_details.thinking_tokens``).
- Gemini ``promptTokenCount`` includes ``cachedContentTokenCount``; ``candidatesTokenCount`` EXCLUDES the
  thinking tokens (``thoughtsTokenCount``); ``toolUsePromptTokenCount`` is input too.

``Usage.input_tokens`` is the total input (cached included), ``Usage.output_tokens`` the total output
(reasoning included), as routing.core.answer.cost_usd expects.
"""

from __future__ import annotations

from typing import Any

from routing.core.answer import Usage


def _int(value: Any) -> int:
    # A JSON integer is exactly an int (``bool`` is a subclass, and ``true`` is no count): one class test.
    return value if value.__class__ is int and value > 0 else 0


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def usage_from_openai(data: Any) -> Usage:
    """Usage from an OpenAI ``usage`` object (chat completion or final stream chunk)."""
    usage = _dict(data)
    prompt_details = _dict(usage.get("prompt_tokens_details"))
    completion_details = _dict(usage.get("completion_tokens_details"))
    return Usage(
        input_tokens=_int(usage.get("prompt_tokens")),
        output_tokens=_int(usage.get("completion_tokens")),
        cached_input_tokens=_int(prompt_details.get("cached_tokens")),
        cache_creation_tokens=_int(prompt_details.get("cache_write_tokens")),
        reasoning_tokens=_int(completion_details.get("reasoning_tokens")),
    )


def openai_usage(usage: Usage) -> dict[str, Any]:
    """An OpenAI ``usage`` object for ``usage``."""
    prompt_details: dict[str, Any] = {"cached_tokens": usage.cached_input_tokens}
    if usage.cache_creation_tokens:
        prompt_details["cache_write_tokens"] = usage.cache_creation_tokens
    return {
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.total_tokens,
        "prompt_tokens_details": prompt_details,
        "completion_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
    }


def usage_from_anthropic(data: Any, base: Usage | None = None) -> Usage:
    """Usage from an Anthropic ``usage`` object; fields it lacks keep ``base``'s values.

    ``base`` lets a stream combine message_start (input and cache counts) with message_delta (cumulative
    output, and in newer API versions the input counts again).
    """
    usage = _dict(data)
    previous = base or Usage()
    fresh = usage.get("input_tokens")
    read = usage.get("cache_read_input_tokens")
    written = usage.get("cache_creation_input_tokens")
    cached = _int(read) if read is not None else previous.cached_input_tokens
    creation = _int(written) if written is not None else previous.cache_creation_tokens
    if fresh is not None:
        input_tokens = _int(fresh) + cached + creation
    else:
        previous_fresh = previous.input_tokens - previous.cached_input_tokens - previous.cache_creation_tokens
        input_tokens = max(previous_fresh, 0) + cached + creation
    output = usage.get("output_tokens")
    details = usage.get("output_tokens_details")
    return Usage(
        input_tokens=input_tokens,
        output_tokens=_int(output) if output is not None else previous.output_tokens,
        cached_input_tokens=cached,
        cache_creation_tokens=creation,
        reasoning_tokens=(
            _int(_dict(details).get("thinking_tokens")) if details is not None else previous.reasoning_tokens
        ),
    )


def anthropic_usage(usage: Usage) -> dict[str, Any]:
    """An Anthropic ``usage`` object for ``usage`` (``input_tokens`` without the cached ones)."""
    fresh = max(usage.input_tokens - usage.cached_input_tokens - usage.cache_creation_tokens, 0)
    out: dict[str, Any] = {
        "input_tokens": fresh,
        "cache_creation_input_tokens": usage.cache_creation_tokens,
        "cache_read_input_tokens": usage.cached_input_tokens,
        "output_tokens": usage.output_tokens,
    }
    if usage.reasoning_tokens:
        out["output_tokens_details"] = {"thinking_tokens": usage.reasoning_tokens}
    return out


def usage_from_gemini(data: Any) -> Usage:
    """Usage from a Gemini ``usageMetadata`` object."""
    usage = _dict(data)
    thoughts = _int(usage.get("thoughtsTokenCount"))
    return Usage(
        input_tokens=_int(usage.get("promptTokenCount")) + _int(usage.get("toolUsePromptTokenCount")),
        output_tokens=_int(usage.get("candidatesTokenCount")) + thoughts,
        cached_input_tokens=_int(usage.get("cachedContentTokenCount")),
        reasoning_tokens=thoughts,
    )
