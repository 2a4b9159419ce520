"""Bedrock ConverseStream events -> OpenAI chunks.

The events arrive as AWS event-stream frames (read by ``aws_eventstream.EventStreamParser``), each a JSON
payload named by its ``:event-type``::

    messageStart          {role}
    contentBlockStart     {contentBlockIndex, start: {toolUse: {toolUseId, name}}}   (tool calls only)
    contentBlockDelta     {contentBlockIndex, delta: {text} | {toolUse: {input: "<JSON fragment>"}}
                                                     | {reasoningContent: {text} | {signature}
                                                                          | {redactedContent}}}
    contentBlockStop      {contentBlockIndex}
    messageStop           {stopReason}: the answer is complete
    metadata              {usage, metrics}: the last event, the end marker

A modelled exception (``exception:throttlingException``, ``exception:modelStreamErrorException``, ...) or an
error frame is the provider's failure mid-stream. The fragments of the gateway's forced ``JSON_TOOL`` (a
JSON-schema answer) are the answer's text. Tool calls are numbered in order of appearance.
"""

from __future__ import annotations

from typing import Any

from routing.core.answer import Usage
from routing.providers.bedrock.request import JSON_TOOL
from routing.providers.bedrock.response import finish_from_bedrock, usage_from_bedrock
from routing.providers.common.finish_reasons import openai_finish
from routing.providers.common.ids import openai_response_id
from routing.providers.common.shape import int_or, object_or_empty
from routing.providers.common.thinking_ids import REDACTED, THINKING, ThinkingBlock, id_with_thinking
from routing.providers.common.usage import openai_usage
from routing.providers.streaming.decoding import ChunkDecoder, StreamFailure, load_event_json
from routing.providers.streaming.sse import SSEEvent

# The in-stream exceptions, as the error types the gateway's stream handling reads ("overload" retries as such).
_FAILURE_TYPES = {
    "throttlingException": "rate_limit_error",
    "serviceUnavailableException": "overloaded_error",
    "validationException": "invalid_request_error",
}


class BedrockEventDecoder(ChunkDecoder):
    def __init__(self, *, public_model: str = "", created: int = 0) -> None:
        super().__init__(public_model=public_model, created=created)
        self.response_id = openai_response_id(None)  # ConverseStream names no id
        self._usage: Usage | None = None
        self._stopped = False  # messageStop arrived: the answer is whole (metadata with the usage follows)
        self._tool_of_block: dict[int, int] = {}  # contentBlockIndex -> the OpenAI tool call index
        self._json_blocks: set[int] = set()  # blocks of the forced JSON tool: their input is the answer's text
        # Claude's reasoning blocks since the last tool call, by block index: [text parts, signature parts] or the
        # redacted data; the next tool call's id carries them (thinking_ids).
        self._reasoning: dict[int, list[list[str]] | str] = {}

    @property
    def complete(self) -> bool:
        return self._stopped or self.done

    def partial_usage(self) -> Usage | None:
        return self._usage

    def decode(self, event: SSEEvent) -> list[dict[str, Any]]:
        kind = event.event or ""
        if kind.startswith(("exception:", "error:")):
            data = load_event_json(event)
            name = kind.partition(":")[2]
            message = data.get("message") or data.get("Message") or f"the upstream reported {name} mid-stream"
            self.failure = StreamFailure(_FAILURE_TYPES.get(name, "api_error"), str(message))
            return []
        data = load_event_json(event)
        if kind == "contentBlockDelta":
            return self._delta(data)
        if kind == "contentBlockStart":
            return self._block_start(data)
        if kind == "messageStart":
            return [self.chunk({"role": "assistant", "content": ""})]
        if kind == "messageStop":
            json_answer = bool(self._json_blocks) and not self._tool_of_block
            self.finish_override = finish_from_bedrock(data.get("stopReason"), json_answer=json_answer)
            self._stopped = True
            return [self.chunk(finish=openai_finish(self.finish_override))]
        if kind == "metadata":
            self._usage = usage_from_bedrock(data.get("usage"))
            self.done = True
        return []  # contentBlockStop, and event types added later

    def _block_start(self, data: dict[str, Any]) -> list[dict[str, Any]]:
        use = object_or_empty(object_or_empty(data.get("start")).get("toolUse"))
        if not use:
            return []
        block = int_or(data.get("contentBlockIndex"), -1)
        if use.get("name") == JSON_TOOL:
            self._json_blocks.add(block)
            return []
        position = len(self._tool_of_block)
        self._tool_of_block[block] = position
        call_id = id_with_thinking(str(use.get("toolUseId") or ""), self._thinking_blocks())
        call = {"index": position, "id": call_id, "type": "function",
                "function": {"name": str(use.get("name") or ""), "arguments": ""}}
        return [self.chunk({"tool_calls": [call]})]

    def _delta(self, data: dict[str, Any]) -> list[dict[str, Any]]:
        delta = object_or_empty(data.get("delta"))
        text = delta.get("text")
        if isinstance(text, str):
            return [self.chunk({"content": text})] if text else []
        use = delta.get("toolUse")
        if isinstance(use, dict):
            fragment = use.get("input")
            if not isinstance(fragment, str) or not fragment:
                return []
            block = int_or(data.get("contentBlockIndex"), -1)
            if block in self._json_blocks:
                return [self.chunk({"content": fragment})]
            position = self._tool_of_block.get(block)
            if position is None:
                return []
            return [self.chunk({"tool_calls": [{"index": position, "function": {"arguments": fragment}}]})]
        reasoning = object_or_empty(delta.get("reasoningContent"))
        if reasoning:
            return self._reasoning_delta(int_or(data.get("contentBlockIndex"), -1), reasoning)
        return []  # delta kinds added later

    def _reasoning_delta(self, block: int, reasoning: dict[str, Any]) -> list[dict[str, Any]]:
        if isinstance(reasoning.get("redactedContent"), str):
            self._reasoning[block] = reasoning["redactedContent"]
            return []
        parts = self._reasoning.setdefault(block, [[], []])
        if isinstance(parts, str):
            return []
        if isinstance(reasoning.get("signature"), str):
            parts[1].append(reasoning["signature"])
        text = reasoning.get("text")
        if isinstance(text, str) and text:
            parts[0].append(text)
            return [self.chunk({"reasoning_content": text})]
        return []

    def _thinking_blocks(self) -> list[ThinkingBlock]:
        """The reasoning blocks read since the last tool call, in order (and forgotten)."""
        blocks = [ThinkingBlock(REDACTED, parts) if isinstance(parts, str)
                  else ThinkingBlock(THINKING, "".join(parts[0]), "".join(parts[1]))
                  for _, parts in sorted(self._reasoning.items())]
        self._reasoning = {}
        return blocks

    def final_chunks(self) -> list[dict[str, Any]]:
        return [self.usage_chunk(openai_usage(self._usage))] if self._usage is not None else []
