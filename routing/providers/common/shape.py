"""Typed reads of a client's JSON body that fail with the JSON path of the bad field.

The translators read untrusted bodies; a wrong type must become a 400 naming the field, never a
KeyError or TypeError (a 500).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from routing.providers.errors import CapabilityError, RequestShapeError


def as_list(value: Any, path: str) -> list[Any]:
    if not isinstance(value, list):
        raise RequestShapeError(f"{path} must be an array", path)
    return value


def as_dict(value: Any, path: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise RequestShapeError(f"{path} must be an object", path)
    return value


def as_str(value: Any, path: str) -> str:
    if not isinstance(value, str):
        raise RequestShapeError(f"{path} must be a string", path)
    return value


def as_number(value: Any, path: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RequestShapeError(f"{path} must be a number", path)
    return float(value)


def as_int(value: Any, path: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise RequestShapeError(f"{path} must be an integer", path)
    return value


def text_of(value: Any, path: str) -> str:
    """The text of a content that may be a string or a list of text parts/blocks (joined with newlines)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    texts = []
    for i, part in enumerate(as_list(value, path)):
        part = as_dict(part, f"{path}[{i}]")
        if part.get("type") != "text":
            raise RequestShapeError(f"only text is allowed here, not '{part.get('type')}'", f"{path}[{i}].type")
        texts.append(as_str(part.get("text"), f"{path}[{i}].text"))
    return "\n".join(texts)


def assistant_texts(message: dict[str, Any], path: str) -> list[str]:
    """An OpenAI assistant message's texts in order (its text parts and refusals; a string content is one text),
    after refusing the legacy ``function_call`` no provider format here carries. Empty texts are kept: each
    format decides whether it may send one."""
    if message.get("function_call") is not None:
        raise RequestShapeError("legacy function_call is not supported: use tool_calls", f"{path}.function_call")
    content = message.get("content")
    if content is None:
        return []
    if not isinstance(content, list):
        return [as_str(content, f"{path}.content")]
    texts = []
    for j, part in enumerate(content):
        part = as_dict(part, f"{path}.content[{j}]")
        texts.append(as_str(part.get("text") if part.get("type") == "text" else part.get("refusal"),
                            f"{path}.content[{j}]"))
    return texts


def refuse_unknown_keys(
    body: Mapping[str, Any], *, known: frozenset[str], target: str, ignorable: frozenset[str] = frozenset()
) -> None:
    """Refuse a top-level field the translation does not carry over, so nothing is dropped silently.

    ``ignorable`` lists documented hints that are dropped on purpose (see docs/providers.md).
    """
    for key in body:
        if key not in known and key not in ignorable:
            raise CapabilityError(key, f"'{key}' has no equivalent in the {target} format", key)


def is_set(value: Any) -> bool:
    """True for a value that asks for something (not None, False, 0, empty)."""
    return value not in (None, False, 0, "", [], {})


def object_or_empty(value: Any) -> dict[str, Any]:
    """``value`` if it is a JSON object, else an empty one: for lenient reads of upstream answers."""
    return value if isinstance(value, dict) else {}


def list_or_empty(value: Any) -> list[Any]:
    """``value`` if it is a JSON array, else an empty one: for lenient reads of upstream answers."""
    return value if isinstance(value, list) else []


def int_or(value: Any, default: int) -> int:
    """``value`` if it is an integer, else ``default``."""
    return value if isinstance(value, int) and not isinstance(value, bool) else default


# The OpenAI chat fields a translation to another wire format reads (or refuses by name when it cannot carry them).
OPENAI_CHAT_FIELDS = frozenset(
    {
        "model", "messages", "max_tokens", "max_completion_tokens", "temperature", "top_p", "top_k", "stop",
        "n", "seed", "tools", "tool_choice", "response_format", "reasoning_effort", "stream", "stream_options",
        "presence_penalty", "frequency_penalty", "logit_bias", "logprobs", "top_logprobs", "modalities",
        "audio",
    }
)
# OpenAI hints with no equivalent in the other formats that do not change what a correct answer is (a
# translation drops them). parallel_tool_calls=false is among them: those providers decide alone whether to call
# functions in parallel.
OPENAI_IGNORABLE_HINTS = frozenset(
    {
        "user", "safety_identifier", "store", "metadata", "service_tier", "prompt_cache_key",
        "prompt_cache_retention", "prompt_cache_options", "prediction", "verbosity", "parallel_tool_calls",
    }
)
