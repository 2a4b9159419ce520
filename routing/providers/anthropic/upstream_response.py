"""Anthropic Messages responses: the Answer they carry, and their OpenAI chat completion equivalent."""

from __future__ import annotations

import json
from typing import Any

from routing.core.answer import Answer, ToolCall
from routing.providers.common.finish_reasons import finish_from_anthropic
from routing.providers.common.thinking_ids import (
    REDACTED,
    THINKING,
    ThinkingBlock,
    block_from_anthropic,
    id_with_thinking,
)
from routing.providers.common.usage import usage_from_anthropic
from routing.providers.errors import MalformedResponse
from routing.providers.pivot.chat_completion import assistant_message, chat_completion, completion_choice


def _content_blocks(message: Any) -> list[dict[str, Any]]:
    if not isinstance(message, dict) or not isinstance(message.get("content"), list):
        raise MalformedResponse("the upstream response has no 'content' array")
    return [block for block in message["content"] if isinstance(block, dict)]


def _parts(blocks: list[dict[str, Any]], *, carry_thinking: bool = True) -> tuple[str, str, tuple[ToolCall, ...]]:
    """(text, thinking text, tool calls); with ``carry_thinking`` the thinking blocks before a tool call ride in its
    id (thinking_ids)."""
    texts: list[str] = []
    thoughts: list[str] = []
    calls: list[ToolCall] = []
    pending: list[ThinkingBlock] = []
    for block in blocks:
        kind = block.get("type")
        if kind == "text":
            texts.append(str(block.get("text") or ""))
        elif kind in (THINKING, REDACTED):
            thinking = block_from_anthropic(block)
            if thinking is not None:
                pending.append(thinking)
                if thinking.kind == THINKING:
                    thoughts.append(thinking.text)
        elif kind == "tool_use":
            call_id = str(block.get("id") or "")
            if carry_thinking:
                call_id = id_with_thinking(call_id, pending)
            pending = []
            calls.append(
                ToolCall(
                    id=call_id,
                    name=str(block.get("name") or ""),
                    arguments=json.dumps(block.get("input") or {}, ensure_ascii=False),
                )
            )
    return "".join(texts), "".join(thoughts), tuple(calls)


def answer_from_anthropic(message: Any, *, carry_thinking: bool = False) -> Answer:
    """An Anthropic message as an Answer; with ``carry_thinking`` its tool call ids are an OpenAI client's."""
    text, reasoning, calls = _parts(_content_blocks(message), carry_thinking=carry_thinking)
    return Answer(
        text=text,
        finish_reason=finish_from_anthropic(message.get("stop_reason")),
        tool_calls=calls,
        reasoning_text=reasoning,
    )


def anthropic_to_openai_completion(message: Any, *, public_model: str, created: int) -> dict[str, Any]:
    """The OpenAI chat completion equivalent to an Anthropic message. Thinking becomes ``reasoning_content``,
    the extension DeepSeek introduced and OpenAI-compatible clients read; the signed blocks themselves ride in the
    ids of the tool calls they preceded, for the next turn (thinking_ids)."""
    text, reasoning, calls = _parts(_content_blocks(message))
    tool_calls = [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                  for c in calls]
    return chat_completion(
        upstream_id=message.get("id"),
        created=created,
        model=public_model,
        choices=[completion_choice(assistant_message(text, reasoning or None, tool_calls),
                                   finish_from_anthropic(message.get("stop_reason")))],
        usage=usage_from_anthropic(message.get("usage")),
    )
