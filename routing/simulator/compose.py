"""Compose the answer to a Prompt: its text or tool call, finish reason and usage, before any wire format.

Answers are deterministic: the same conversation sent as the n-th request for a model gets the same
answer. Text echoes the last user message with the counter (``Simulated answer 3 from gpt-4o: ...``);
tool calls and structured output carry the smallest value valid against the request's own schema.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from routing.simulator.config import ModelBehaviour
from routing.simulator.faults import CONTENT_KINDS, Fault
from routing.simulator.prompt import Prompt, ToolSpec, estimate_tokens
from routing.simulator.schema_instance import minimal_instance, violating_instance

# Neutral finish reasons; each wire module maps them onto its provider's words.
FINISH_STOP = "stop"
FINISH_LENGTH = "length"
FINISH_TOOL_CALLS = "tool_calls"
FINISH_STOP_SEQUENCE = "stop_sequence"

_FILLER = ["lorem", "ipsum", "dolor", "sit", "amet", "consectetur", "adipiscing", "elit", "sed", "do", "eiusmod",
           "tempor", "incididunt"]
_SNIPPET_CHARS = 200


@dataclass(frozen=True, slots=True)
class Usage:
    input_tokens: int  # every prompt token, cached ones included
    output_tokens: int  # every generated token over all choices, reasoning included
    cached_tokens: int = 0  # read from the prompt cache
    cache_creation_tokens: int = 0  # written to the prompt cache (Anthropic's explicit caching)
    reasoning_tokens: int = 0


@dataclass(frozen=True, slots=True)
class ToolCallOut:
    name: str
    arguments: str  # JSON text exactly as sent (cut short when the answer is truncated)


@dataclass(frozen=True, slots=True)
class Reply:
    text: str
    finish: str
    usage: Usage
    tool_call: ToolCallOut | None = None
    reasoning_text: str = ""
    stop_sequence: str | None = None


def compose_reply(
    prompt: Prompt,
    behaviour: ModelBehaviour,
    *,
    counter: int,
    fault: Fault | None = None,
    cached_tokens: int = 0,
    cache_creation_tokens: int = 0,
) -> Reply:
    """The answer to ``prompt``, shaped by the model's behaviour and a content fault, if any."""
    kind = fault.kind if fault is not None and fault.kind in CONTENT_KINDS else None
    echo = _echo_text(prompt, behaviour, counter)
    text = ""
    tool_call: ToolCallOut | None = None
    if kind == "unknown_tool":
        assert fault is not None
        tool_call = ToolCallOut(_undeclared_name(fault.param("tool"), prompt.tools), "{}")
    elif kind == "empty":
        pass
    elif prompt.wants_tool_call:
        tool = prompt.chosen_tool()
        assert tool is not None
        value = violating_instance(tool.schema) if kind == "schema_violation" else minimal_instance(tool.schema)
        tool_call = ToolCallOut(tool.name, _dumps(value))
    elif prompt.output_schema is not None:
        schema = prompt.output_schema
        text = _dumps(violating_instance(schema) if kind == "schema_violation" else minimal_instance(schema))
    elif prompt.json_mode:
        text = _dumps({} if kind == "schema_violation" else {"answer": echo})
    else:
        text = "{}" if kind == "schema_violation" else echo

    finish = FINISH_TOOL_CALLS if tool_call is not None else FINISH_STOP
    stop_sequence = None
    if tool_call is None and text and prompt.stop_sequences:
        text, stop_sequence = _cut_at_stop(text, prompt.stop_sequences)
        if stop_sequence is not None:
            finish = FINISH_STOP_SEQUENCE
    limit_chars = prompt.max_tokens * 4 if prompt.max_tokens is not None else None
    if kind == "truncate":
        text, tool_call = _cut(text, tool_call, None)
        finish = FINISH_LENGTH
    elif limit_chars is not None and len(tool_call.arguments if tool_call else text) > limit_chars:
        text, tool_call = _cut(text, tool_call, limit_chars)
        finish = FINISH_LENGTH

    reasoning_text = ""
    reasoning_tokens = 0
    if kind != "empty":
        if prompt.reasoning_visible:
            reasoning_text = f"The user asks: {_snippet(prompt.last_user_text, 120)}. I will answer directly."
            reasoning_tokens = estimate_tokens(len(reasoning_text))
        else:
            reasoning_tokens = prompt.reasoning_tokens
    per_choice = estimate_tokens(len(text)) + reasoning_tokens
    if tool_call is not None:
        per_choice += estimate_tokens(len(tool_call.name) + len(tool_call.arguments))
    usage = Usage(
        input_tokens=prompt.input_tokens,
        output_tokens=per_choice * prompt.choices,
        cached_tokens=cached_tokens,
        cache_creation_tokens=cache_creation_tokens,
        reasoning_tokens=reasoning_tokens * prompt.choices,
    )
    return Reply(text, finish, usage, tool_call, reasoning_text, stop_sequence)


def split_text(text: str, parts: int) -> list[str]:
    """``text`` in at most ``parts`` consecutive pieces of nearly equal length (none for "")."""
    if not text:
        return []
    parts = max(1, min(parts, len(text)))
    size, extra = divmod(len(text), parts)
    pieces = []
    start = 0
    for index in range(parts):
        end = start + size + (1 if index < extra else 0)
        pieces.append(text[start:end])
        start = end
    return pieces


def _echo_text(prompt: Prompt, behaviour: ModelBehaviour, counter: int) -> str:
    if behaviour.reply is not None:
        text = behaviour.reply
    else:
        snippet = _snippet(prompt.last_user_text, _SNIPPET_CHARS)
        text = f"Simulated answer {counter} from {prompt.model}" + (f": {snippet}" if snippet else ".")
    if behaviour.reply_tokens is not None:
        text = _fit(text, behaviour.reply_tokens * 4)
    return text


def _snippet(text: str, limit: int) -> str:
    collapsed = " ".join(text.split())
    return collapsed if len(collapsed) <= limit else collapsed[:limit].rstrip() + "..."


def _fit(text: str, chars: int) -> str:
    """``text`` padded with filler words, or cut, to ``chars`` characters."""
    words = [text]
    length = len(text)
    index = 0
    while length < chars:
        word = _FILLER[index % len(_FILLER)]
        words.append(word)
        length += len(word) + 1
        index += 1
    return " ".join(words)[:chars]


def _cut_at_stop(text: str, stops: tuple[str, ...]) -> tuple[str, str | None]:
    """The text before the earliest stop sequence, and that sequence (None when none occurs)."""
    best: tuple[int, str] | None = None
    for stop in stops:
        position = text.find(stop)
        if position >= 0 and (best is None or position < best[0]):
            best = (position, stop)
    if best is None:
        return text, None
    return text[: best[0]], best[1]


def _cut(text: str, tool_call: ToolCallOut | None, limit: int | None) -> tuple[str, ToolCallOut | None]:
    """Cut the output (tool arguments when there is a tool call) to ``limit`` chars, or to half."""
    if tool_call is not None:
        arguments = tool_call.arguments
        keep = limit if limit is not None else len(arguments) // 2
        return text, ToolCallOut(tool_call.name, arguments[:keep])
    keep = limit if limit is not None else len(text) // 2
    return text[:keep], None


def _undeclared_name(wanted: str, tools: tuple[ToolSpec, ...]) -> str:
    declared = {tool.name for tool in tools}
    name = wanted
    suffix = 1
    while name in declared:
        suffix += 1
        name = f"{wanted}_{suffix}"
    return name


def _dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
