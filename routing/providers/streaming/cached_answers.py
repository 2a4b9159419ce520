"""A cached answer between its two forms, in each client protocol: a JSON body replayed as a well-formed stream
(``replay_frames``), and a stream the client was sent assembled back into the JSON body (``assemble_body``).

The cache keeps every answer as the JSON body its client protocol answers with, so a streamed request can be
served from a JSON answer and a JSON request from a streamed one. The three protocols:

* ``openai`` (chat completions): one chunk per choice with its whole delta (role, content, reasoning, tool calls),
  one with its finish reason, the usage chunk when the client asked for it (``stream_options.include_usage``),
  then ``data: [DONE]``;
* ``anthropic`` (messages): ``message_start``, each content block opened, filled (text, thinking and its
  signature, a tool's input as one ``input_json_delta``) and closed, ``message_delta`` with the stop reason and
  usage, ``message_stop``;
* ``responses``: ``response.created``, ``response.in_progress``, each output item added, filled (text parts,
  function call arguments) and done, then ``response.completed``, each with its ``sequence_number``.

Pure: no I/O. The assembly reads the frames the gateway itself wrote, so an event it cannot read makes the
answer unstorable (None), never an error.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any, Literal

from routing.providers.streaming.sse import DONE_FRAME, SSEParser, data_frame, event_frame

Protocol = Literal["openai", "anthropic", "responses"]


def replay_frames(protocol: Protocol, body: Mapping[str, Any], *, include_usage: bool) -> list[bytes]:
    """The stream frames of the JSON answer ``body`` in ``protocol``."""
    if protocol == "anthropic":
        return _anthropic_frames(body)
    if protocol == "responses":
        return _responses_frames(body)
    return _openai_frames(body, include_usage=include_usage)


def assemble_body(protocol: Protocol, stream: bytes, *,
                  usage: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
    """The JSON answer the frames ``stream`` spell in ``protocol``; None when they are not one whole answer.

    ``usage`` is the chat completion's usage for a stream whose client did not ask for the usage chunk."""
    try:
        events = list(_events(stream))
        if protocol == "anthropic":
            return _anthropic_body(events)
        if protocol == "responses":
            return _responses_body(events)
        return _openai_body(events, usage)
    except (ValueError, TypeError, KeyError, AttributeError, IndexError):
        return None


def _events(stream: bytes) -> Iterator[tuple[str | None, Any]]:
    parser = SSEParser()
    for event in [*parser.feed(stream), *parser.flush()]:
        if event.data is None:
            continue
        if event.data == "[DONE]":
            yield event.event, "[DONE]"
            continue
        yield event.event, json.loads(event.data)


# --- openai -------------------------------------------------------------------------------------------------


def _openai_frames(body: Mapping[str, Any], *, include_usage: bool) -> list[bytes]:
    head = {"id": body.get("id"), "object": "chat.completion.chunk", "created": body.get("created"),
            "model": body.get("model")}
    if body.get("system_fingerprint") is not None:
        head["system_fingerprint"] = body["system_fingerprint"]
    frames: list[bytes] = []
    for choice in body.get("choices") or []:
        message = choice.get("message") or {}
        delta: dict[str, Any] = {"role": message.get("role", "assistant")}
        for field in ("reasoning_content", "content", "refusal"):
            if message.get(field) is not None:
                delta[field] = message[field]
        calls = message.get("tool_calls") or []
        if calls:
            delta["tool_calls"] = [{"index": n, "id": call.get("id"), "type": call.get("type", "function"),
                                    "function": call.get("function") or {}} for n, call in enumerate(calls)]
        index = choice.get("index", 0)
        frames.append(data_frame({**head, "choices": [{"index": index, "delta": delta, "logprobs": None,
                                                       "finish_reason": None}]}))
        frames.append(data_frame({**head, "choices": [{"index": index, "delta": {}, "logprobs": None,
                                                       "finish_reason": choice.get("finish_reason")}]}))
    if include_usage and body.get("usage") is not None:
        frames.append(data_frame({**head, "choices": [], "usage": body["usage"]}))
    frames.append(DONE_FRAME)
    return frames


def _openai_body(events: list[tuple[str | None, Any]], usage: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if not events or events[-1][1] != "[DONE]":
        return None
    head: dict[str, Any] | None = None
    choices: dict[int, dict[str, Any]] = {}
    final_usage = dict(usage) if usage is not None else None
    for _name, chunk in events[:-1]:
        if not isinstance(chunk, dict) or "error" in chunk:
            return None
        if head is None:
            head = {"id": chunk.get("id"), "object": "chat.completion", "created": chunk.get("created"),
                    "model": chunk.get("model")}
            if chunk.get("system_fingerprint") is not None:
                head["system_fingerprint"] = chunk["system_fingerprint"]
        if isinstance(chunk.get("usage"), dict):
            final_usage = chunk["usage"]
        for choice in chunk.get("choices") or []:
            _add_openai_delta(choices.setdefault(int(choice.get("index", 0)), _new_choice(int(choice.get("index", 0)))),
                              choice)
    if head is None or not choices:
        return None
    out = {**head, "choices": [_finished_choice(choices[n]) for n in sorted(choices)]}
    if final_usage is not None:
        out["usage"] = final_usage
    return out


def _new_choice(index: int) -> dict[str, Any]:
    return {"index": index, "role": "assistant", "content": [], "reasoning": [], "refusal": [], "calls": {},
            "finish_reason": None}


def _add_openai_delta(state: dict[str, Any], choice: Mapping[str, Any]) -> None:
    delta = choice.get("delta") or {}
    if isinstance(delta.get("role"), str):
        state["role"] = delta["role"]
    for field, into in (("content", "content"), ("reasoning_content", "reasoning"), ("refusal", "refusal")):
        if isinstance(delta.get(field), str):
            state[into].append(delta[field])
    for call in delta.get("tool_calls") or []:
        slot = state["calls"].setdefault(int(call.get("index", len(state["calls"]))),
                                         {"id": None, "type": "function", "name": "", "arguments": []})
        if call.get("id"):
            slot["id"] = call["id"]
        function = call.get("function") or {}
        if function.get("name"):
            slot["name"] += function["name"]
        if isinstance(function.get("arguments"), str):
            slot["arguments"].append(function["arguments"])
    if choice.get("finish_reason"):
        state["finish_reason"] = choice["finish_reason"]


def _finished_choice(state: dict[str, Any]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": state["role"],
                               "content": "".join(state["content"]) if state["content"] or not state["calls"] else None}
    if state["reasoning"]:
        message["reasoning_content"] = "".join(state["reasoning"])
    if state["refusal"]:
        message["refusal"] = "".join(state["refusal"])
    if state["calls"]:
        message["tool_calls"] = [{"id": call["id"], "type": call["type"],
                                  "function": {"name": call["name"], "arguments": "".join(call["arguments"])}}
                                 for _, call in sorted(state["calls"].items())]
    return {"index": state["index"], "message": message, "logprobs": None, "finish_reason": state["finish_reason"]}


# --- anthropic ----------------------------------------------------------------------------------------------


def _anthropic_frames(body: Mapping[str, Any]) -> list[bytes]:
    usage = dict(body.get("usage") or {})
    start_usage = {**usage, "output_tokens": 0}
    message = {**body, "content": [], "stop_reason": None, "stop_sequence": None, "usage": start_usage}
    frames = [event_frame("message_start", {"type": "message_start", "message": message})]
    for index, block in enumerate(body.get("content") or []):
        frames += _anthropic_block(index, block)
    frames.append(event_frame("message_delta", {
        "type": "message_delta",
        "delta": {"stop_reason": body.get("stop_reason"), "stop_sequence": body.get("stop_sequence")},
        "usage": usage,
    }))
    frames.append(event_frame("message_stop", {"type": "message_stop"}))
    return frames


def _anthropic_block(index: int, block: Mapping[str, Any]) -> list[bytes]:
    kind = block.get("type")
    deltas: list[dict[str, Any]] = []
    if kind == "text":
        opened: dict[str, Any] = {**block, "text": ""}
        deltas.append({"type": "text_delta", "text": block.get("text", "")})
    elif kind == "thinking":
        opened = {**block, "thinking": "", "signature": ""}
        deltas.append({"type": "thinking_delta", "thinking": block.get("thinking", "")})
        if block.get("signature"):
            deltas.append({"type": "signature_delta", "signature": block["signature"]})
    elif kind == "tool_use":
        opened = {**block, "input": {}}
        deltas.append({"type": "input_json_delta",
                       "partial_json": json.dumps(block.get("input") or {}, separators=(",", ":"), ensure_ascii=False)})
    else:  # redacted thinking and server tool blocks arrive whole in their start event
        opened = dict(block)
    frames = [event_frame("content_block_start", {"type": "content_block_start", "index": index,
                                                  "content_block": opened})]
    frames += [event_frame("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})
               for delta in deltas]
    frames.append(event_frame("content_block_stop", {"type": "content_block_stop", "index": index}))
    return frames


def _anthropic_body(events: list[tuple[str | None, Any]]) -> dict[str, Any] | None:
    message: dict[str, Any] | None = None
    blocks: dict[int, dict[str, Any]] = {}
    partial: dict[int, list[str]] = {}
    stopped = False
    for _name, data in events:
        kind = data.get("type") if isinstance(data, dict) else None
        if kind == "message_start":
            message = dict(data["message"])
        elif kind == "content_block_start":
            blocks[int(data["index"])] = dict(data["content_block"])
        elif kind == "content_block_delta":
            index = int(data["index"])
            block, delta = blocks[index], data["delta"]
            if delta["type"] == "text_delta":
                block["text"] = block.get("text", "") + delta["text"]
            elif delta["type"] == "thinking_delta":
                block["thinking"] = block.get("thinking", "") + delta["thinking"]
            elif delta["type"] == "signature_delta":
                block["signature"] = delta["signature"]
            elif delta["type"] == "input_json_delta":
                partial.setdefault(index, []).append(delta["partial_json"])
            else:
                return None
        elif kind == "content_block_stop":
            index = int(data["index"])
            if index in partial:
                text = "".join(partial.pop(index))
                blocks[index]["input"] = json.loads(text) if text else {}
        elif kind == "message_delta" and message is not None:
            message.update({k: v for k, v in (data.get("delta") or {}).items()})
            message["usage"] = {**(message.get("usage") or {}), **(data.get("usage") or {})}
        elif kind == "message_stop":
            stopped = True
        elif kind == "error":
            return None
    if message is None or not stopped or partial:
        return None
    message["content"] = [blocks[n] for n in sorted(blocks)]
    return message


# --- responses ----------------------------------------------------------------------------------------------


class _Sequence:
    def __init__(self) -> None:
        self.number = 0

    def frame(self, kind: str, fields: dict[str, Any]) -> bytes:
        frame = event_frame(kind, {"type": kind, "sequence_number": self.number, **fields})
        self.number += 1
        return frame


def _responses_frames(body: Mapping[str, Any]) -> list[bytes]:
    seq = _Sequence()
    opening = {**body, "status": "in_progress", "output": [], "usage": None, "incomplete_details": None}
    frames = [seq.frame("response.created", {"response": opening}),
              seq.frame("response.in_progress", {"response": opening})]
    for index, item in enumerate(body.get("output") or []):
        frames += _responses_item(seq, index, item)
    ending = "response.completed" if body.get("status", "completed") == "completed" else "response.incomplete"
    frames.append(seq.frame(ending, {"response": dict(body)}))
    return frames


def _responses_item(seq: _Sequence, index: int, item: Mapping[str, Any]) -> list[bytes]:
    kind = item.get("type")
    item_id = item.get("id")
    frames: list[bytes] = []
    if kind == "message":
        frames.append(seq.frame("response.output_item.added", {"output_index": index, "item": {
            **item, "status": "in_progress", "content": []}}))
        for part_index, part in enumerate(item.get("content") or []):
            where = {"item_id": item_id, "output_index": index, "content_index": part_index}
            if part.get("type") == "refusal":
                frames.append(seq.frame("response.content_part.added", {**where, "part": {**part, "refusal": ""}}))
                frames.append(seq.frame("response.refusal.delta", {**where, "delta": part.get("refusal", "")}))
                frames.append(seq.frame("response.refusal.done", {**where, "refusal": part.get("refusal", "")}))
            else:
                frames.append(seq.frame("response.content_part.added", {**where, "part": {**part, "text": ""}}))
                frames.append(seq.frame("response.output_text.delta", {**where, "delta": part.get("text", ""),
                                                                       "logprobs": []}))
                frames.append(seq.frame("response.output_text.done", {**where, "text": part.get("text", ""),
                                                                      "logprobs": []}))
            frames.append(seq.frame("response.content_part.done", {**where, "part": part}))
    elif kind == "function_call":
        frames.append(seq.frame("response.output_item.added", {"output_index": index, "item": {
            **item, "status": "in_progress", "arguments": ""}}))
        where = {"item_id": item_id, "output_index": index}
        frames.append(seq.frame("response.function_call_arguments.delta", {**where,
                                                                           "delta": item.get("arguments", "")}))
        frames.append(seq.frame("response.function_call_arguments.done", {**where,
                                                                          "arguments": item.get("arguments", "")}))
    else:  # reasoning and any other item: added whole
        frames.append(seq.frame("response.output_item.added", {"output_index": index, "item": dict(item)}))
    frames.append(seq.frame("response.output_item.done", {"output_index": index, "item": dict(item)}))
    return frames


def _responses_body(events: list[tuple[str | None, Any]]) -> dict[str, Any] | None:
    for _name, data in reversed(events):
        if isinstance(data, dict) and data.get("type") in ("response.completed", "response.incomplete"):
            response = data.get("response")
            return dict(response) if isinstance(response, dict) else None
        if isinstance(data, dict) and data.get("type") in ("error", "response.failed"):
            return None
    return None
