"""Accumulates OpenAI-shaped stream chunks into the Answer and Usage that validation and cost read.

Every stream is seen as OpenAI chunks at some point (the pivot), so this is the one accumulator: text,
reasoning text, tool calls assembled from argument fragments by index (parallel calls included), the
finish reason and the usage of the first choice.
"""

from __future__ import annotations

from typing import Any

from routing.core.answer import Answer, ToolCall, Usage
from routing.providers.common.finish_reasons import finish_from_openai
from routing.providers.common.usage import usage_from_openai
from routing.providers.pivot.chat_completion import reasoning_text


class _PendingCall:
    __slots__ = ("id", "name", "arguments")

    def __init__(self) -> None:
        self.id = ""
        self.name = ""
        self.arguments: list[str] = []


class ChunkAccumulator:
    """Feed every chunk with ``add``; read ``answer()`` and ``usage`` at any time."""

    __slots__ = ("_text", "_reasoning", "_calls", "_last_call", "_finish", "usage")

    def __init__(self) -> None:
        self._text: list[str] = []
        self._reasoning: list[str] = []
        self._calls: dict[int, _PendingCall] = {}
        self._last_call = 0
        self._finish: str | None = None
        self.usage: Usage | None = None

    def add(self, chunk: dict[str, Any]) -> None:
        # Runs once per streamed event: the common event (one choice, a content delta) takes few steps.
        usage = chunk.get("usage")
        if usage is None and "x_groq" in chunk:
            vendor = chunk["x_groq"]  # Groq reports usage there
            usage = vendor.get("usage") if isinstance(vendor, dict) else None
        if isinstance(usage, dict):
            self.usage = usage_from_openai(usage)
        choices = chunk.get("choices")
        if not choices or not isinstance(choices, list):
            return
        for choice in choices:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta")
            if delta and isinstance(delta, dict):
                content = delta.get("content")
                if content and isinstance(content, str):
                    self._text.append(content)
                    if len(delta) == 1:  # a plain content delta: nothing else to look for
                        finish = choice.get("finish_reason")
                        if finish and isinstance(finish, str):
                            self._finish = finish
                        continue
                if "reasoning_content" in delta or "reasoning" in delta:
                    reasoning = reasoning_text(delta)
                    if reasoning:
                        self._reasoning.append(reasoning)
                calls = delta.get("tool_calls")
                if calls and isinstance(calls, list):
                    for call in calls:
                        if isinstance(call, dict):
                            self._add_call_delta(call)
            finish = choice.get("finish_reason")
            if finish and isinstance(finish, str):
                self._finish = finish

    def add_text(self, text: str) -> None:
        """A plain content delta of choice 0, read without decoding its chunk (the cheap path)."""
        if text:
            self._text.append(text)

    def add_texts(self, texts: list[str]) -> None:
        """A run of plain content deltas of choice 0, read together (empty texts add nothing to the join)."""
        self._text += texts

    def _add_call_delta(self, delta: dict[str, Any]) -> None:
        index = delta.get("index")
        if not isinstance(index, int):
            # A server that omits the index: a new id starts a new call, anything else continues the last.
            new_id = delta.get("id")
            last = self._calls.get(self._last_call)
            starts_new = last is None or (bool(new_id) and last.id not in ("", new_id))
            index = len(self._calls) if starts_new else self._last_call
        pending = self._calls.get(index)
        if pending is None:
            pending = self._calls[index] = _PendingCall()
        self._last_call = index
        if isinstance(delta.get("id"), str) and not pending.id:
            pending.id = delta["id"]
        function = delta.get("function")
        if isinstance(function, dict):
            if isinstance(function.get("name"), str) and not pending.name:
                pending.name = function["name"]
            arguments = function.get("arguments")
            if isinstance(arguments, str):
                pending.arguments.append(arguments)

    def has_content(self) -> bool:
        """Some text, a tool call or reasoning arrived: what ``answer()`` would show, without building it."""
        return any(self._text) or bool(self._calls) or bool(self._reasoning)

    def answer(self, finish_override: str | None = None) -> Answer:
        """The accumulated first choice; ``finish_override`` is the decoder's own normalised verdict."""
        calls = tuple(
            ToolCall(id=call.id, name=call.name, arguments="".join(call.arguments))
            for _, call in sorted(self._calls.items())
        )
        return Answer(
            text="".join(self._text),
            finish_reason=finish_override or finish_from_openai(self._finish),
            tool_calls=calls,
            reasoning_text="".join(self._reasoning),
        )
