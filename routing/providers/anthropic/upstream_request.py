"""OpenAI chat completions request -> Anthropic Messages request.

Anthropic wants the system prompt at the top level, tool results as ``tool_result`` blocks in a user turn,
a ``max_tokens`` on every request, and thinking as a token budget. What it cannot do (n > 1, audio,
logprobs, penalties, logit bias, OpenAI file ids, temperature above 1) is refused here, before sending.

Claude's thinking blocks ride in the tool call ids of the turn they opened (thinking_ids): with thinking on they
are rebuilt in front of their ``tool_use`` blocks and every id is sent as the upstream id it came from. A final
tool turn without them would be refused by Anthropic, so that request is sent with thinking disabled
(thinking_turns); with thinking off no thinking block is sent.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from typing import Any

from routing.core.table import ModelSpec
from routing.providers.common.media import ANTHROPIC_IMAGE_TYPES, guess_media_type, parse_data_url
from routing.providers.common.options import asks_for_audio, max_output_tokens, stop_sequences
from routing.providers.common.reasoning import MIN_ANTHROPIC_BUDGET, thinking_budget
from routing.providers.common.shape import (
    as_dict,
    as_list,
    as_number,
    as_str,
    assistant_texts,
    is_set,
    refuse_unknown_keys,
    text_of,
)
from routing.providers.common.thinking_ids import base_id, split_id
from routing.providers.common.thinking_turns import thinking_requested, thinking_turned_off
from routing.providers.errors import CapabilityError, RequestShapeError
from routing.providers.pivot.messages import chat_messages, merge_turn

DEFAULT_MAX_TOKENS = 4096
JSON_OBJECT_INSTRUCTION = "Respond with a single valid JSON object only: no prose, no code fences."

_KNOWN = frozenset(
    {
        "model", "messages", "max_tokens", "max_completion_tokens", "temperature", "top_p", "stop", "n",
        "tools", "tool_choice", "parallel_tool_calls", "response_format", "reasoning_effort", "user",
        "safety_identifier", "stream", "stream_options", "presence_penalty", "frequency_penalty",
        "logit_bias", "logprobs", "top_logprobs", "modalities", "audio",
    }
)
# Hints that do not change what a correct answer is (determinism, storage, caching, scheduling, style).
_IGNORABLE = frozenset(
    {
        "seed", "store", "metadata", "service_tier", "prompt_cache_key", "prompt_cache_retention",
        "prompt_cache_options", "prediction", "verbosity",
    }
)
_TARGET = "Anthropic Messages"


def openai_to_anthropic(body: Mapping[str, Any], *, model: ModelSpec) -> dict[str, Any]:
    """The Anthropic Messages request equivalent to an OpenAI chat body, for ``model``."""
    refuse_unknown_keys(body, known=_KNOWN, target=_TARGET, ignorable=_IGNORABLE)
    _refuse_unsupported(body)
    thinking_on = thinking_requested(body) and not thinking_turned_off(body)
    system, messages = _messages(as_list(body.get("messages"), "messages"), keep_thinking=thinking_on)
    out: dict[str, Any] = {"model": model.upstream, "messages": messages}

    max_tokens = max_output_tokens(body)
    out["max_tokens"] = max_tokens if max_tokens is not None else model.max_output_tokens or DEFAULT_MAX_TOKENS
    if body.get("temperature") is not None:
        temperature = as_number(body["temperature"], "temperature")
        if temperature > 1:
            raise CapabilityError("temperature", "Anthropic accepts a temperature between 0 and 1", "temperature")
        out["temperature"] = body["temperature"]
    if body.get("top_p") is not None:
        out["top_p"] = as_number(body["top_p"], "top_p")
    stop = stop_sequences(body)
    if stop is not None:
        out["stop_sequences"] = stop
    if body.get("tools"):
        out["tools"] = [_tool(tool, f"tools[{i}]") for i, tool in enumerate(as_list(body["tools"], "tools"))]
    _tool_choice(body, out)
    _response_format(body.get("response_format"), out, system)
    _thinking(body, out, model, turned_off=thinking_requested(body) and not thinking_on)
    if system:
        out["system"] = system
    user = body.get("user") or body.get("safety_identifier")
    if isinstance(user, str) and user:
        out["metadata"] = {"user_id": user}
    return out


def _refuse_unsupported(body: Mapping[str, Any]) -> None:
    n = body.get("n")
    if n is not None and n != 1:
        raise CapabilityError("n", "Anthropic returns one choice per request: n must be 1", "n")
    for key in ("presence_penalty", "frequency_penalty", "logit_bias", "logprobs", "top_logprobs"):
        if is_set(body.get(key)):
            raise CapabilityError(key, f"'{key}' has no equivalent in the {_TARGET} format", key)
    if asks_for_audio(body):
        raise CapabilityError("audio", "Anthropic cannot produce audio output", "modalities")


def _messages(messages: list[Any], *, keep_thinking: bool) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The system blocks and the alternating user/assistant turns (with their thinking when ``keep_thinking``)."""
    system: list[dict[str, Any]] = []
    out: list[dict[str, Any]] = []
    for role, message, path in chat_messages(messages):
        if role == "system":
            text = text_of(message.get("content"), f"{path}.content")
            if text:
                system.append({"type": "text", "text": text})
        elif role == "user":
            merge_turn(out, "user", _user_blocks(message.get("content"), f"{path}.content"))
        elif role == "assistant":
            merge_turn(out, "assistant", _assistant_blocks(message, path, keep_thinking=keep_thinking))
        else:
            merge_turn(out, "user", [_tool_result(message, path)])
    return system, out


def _user_blocks(content: Any, path: str) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    blocks = []
    for j, part in enumerate(as_list(content, path)):
        part_path = f"{path}[{j}]"
        part = as_dict(part, part_path)
        kind = part.get("type")
        if kind == "text":
            blocks.append({"type": "text", "text": as_str(part.get("text"), f"{part_path}.text")})
        elif kind == "image_url":
            blocks.append(_image_block(part, part_path))
        elif kind == "file":
            blocks.append(_document_block(part, part_path))
        elif kind == "input_audio":
            raise CapabilityError("audio", "Anthropic does not accept audio input", part_path)
        else:
            raise RequestShapeError(f"unknown content part type '{kind}'", f"{part_path}.type")
    return blocks


def _image_block(part: dict[str, Any], path: str) -> dict[str, Any]:
    image = part.get("image_url")
    url_path = f"{path}.image_url.url"
    url = as_str(image.get("url") if isinstance(image, dict) else image, url_path)
    inline = parse_data_url(url, url_path)
    if inline is not None:
        if inline.media_type not in ANTHROPIC_IMAGE_TYPES:
            raise CapabilityError(
                "image", f"Anthropic accepts JPEG, PNG, GIF and WebP images, not {inline.media_type}", url_path
            )
        return {"type": "image", "source": {"type": "base64", "media_type": inline.media_type, "data": inline.data}}
    if not url.startswith(("http://", "https://")):
        raise RequestShapeError("an image URL must be http(s) or a base64 data URL", url_path)
    return {"type": "image", "source": {"type": "url", "url": url}}


def _document_block(part: dict[str, Any], path: str) -> dict[str, Any]:
    file = as_dict(part.get("file"), f"{path}.file")
    if file.get("file_id") is not None:
        raise CapabilityError("file", "OpenAI file ids cannot be sent to Anthropic", f"{path}.file.file_id")
    data_path = f"{path}.file.file_data"
    file_data = as_str(file.get("file_data"), data_path)
    filename = file.get("filename") if isinstance(file.get("filename"), str) else None
    inline = parse_data_url(file_data, data_path)
    media_type, data = (
        (inline.media_type, inline.data)
        if inline is not None
        else (guess_media_type(filename or "", "application/pdf"), file_data)
    )
    block: dict[str, Any]
    if media_type == "application/pdf":
        block = {"type": "document", "source": {"type": "base64", "media_type": media_type, "data": data}}
    elif media_type == "text/plain":
        try:
            text = base64.b64decode(data, validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError) as exc:
            raise RequestShapeError("file_data is not base64 UTF-8 text", data_path) from exc
        block = {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": text}}
    else:
        raise CapabilityError("file", f"Anthropic accepts PDF and plain-text documents, not {media_type}", data_path)
    if filename:
        block["title"] = filename
    return block


def _assistant_blocks(message: dict[str, Any], path: str, *, keep_thinking: bool) -> list[dict[str, Any]]:
    if message.get("audio") is not None:
        raise CapabilityError("audio", "Anthropic does not accept audio in the conversation", f"{path}.audio")
    # Anthropic refuses empty text blocks; an empty assistant text carries nothing.
    blocks: list[dict[str, Any]] = [{"type": "text", "text": text} for text in assistant_texts(message, path) if text]
    for k, call in enumerate(as_list(message.get("tool_calls") or [], f"{path}.tool_calls")):
        call_path = f"{path}.tool_calls[{k}]"
        call = as_dict(call, call_path)
        if call.get("type", "function") != "function":
            raise CapabilityError("tools", "custom tool calls have no Anthropic equivalent", f"{call_path}.type")
        function = as_dict(call.get("function"), f"{call_path}.function")
        call_id, thinking = split_id(as_str(call.get("id"), f"{call_path}.id"))
        if keep_thinking and thinking:
            # The first call's thinking opened the turn (before its text); a later call's came right before it.
            rebuilt = [block.as_anthropic() for block in thinking]
            if k == 0:
                blocks[:0] = rebuilt
            else:
                blocks.extend(rebuilt)
        blocks.append(
            {
                "type": "tool_use",
                "id": call_id,
                "name": as_str(function.get("name"), f"{call_path}.function.name"),
                "input": _arguments(function.get("arguments"), f"{call_path}.function.arguments"),
            }
        )
    return blocks


def _arguments(arguments: Any, path: str) -> dict[str, Any]:
    if arguments in (None, ""):
        return {}
    try:
        value = json.loads(as_str(arguments, path))
    except (json.JSONDecodeError, RecursionError) as exc:
        raise RequestShapeError("tool call arguments must be a JSON object", path) from exc
    return as_dict(value, path)


def _tool_result(message: dict[str, Any], path: str) -> dict[str, Any]:
    tool_use_id = base_id(as_str(message.get("tool_call_id"), f"{path}.tool_call_id"))
    content = message.get("content")
    text_only = content is None or isinstance(content, str)
    result: Any = (content or "") if text_only else _user_blocks(content, f"{path}.content")
    return {"type": "tool_result", "tool_use_id": tool_use_id, "content": result}


def _tool(tool: Any, path: str) -> dict[str, Any]:
    tool = as_dict(tool, path)
    if tool.get("type", "function") != "function":
        raise CapabilityError("tools", f"tool type '{tool.get('type')}' has no Anthropic equivalent", f"{path}.type")
    function = as_dict(tool.get("function"), f"{path}.function")
    out: dict[str, Any] = {"name": as_str(function.get("name"), f"{path}.function.name")}
    if isinstance(function.get("description"), str):
        out["description"] = function["description"]
    parameters = function.get("parameters")
    out["input_schema"] = (
        as_dict(parameters, f"{path}.function.parameters")
        if parameters is not None
        else {"type": "object", "properties": {}}
    )
    if function.get("strict") is True:
        out["strict"] = True
    return out


def _tool_choice(body: Mapping[str, Any], out: dict[str, Any]) -> None:
    choice = body.get("tool_choice")
    anthropic_choice: dict[str, Any] | None = None
    if choice == "auto":
        anthropic_choice = {"type": "auto"}
    elif choice == "none":
        anthropic_choice = {"type": "none"}
    elif choice == "required":
        anthropic_choice = {"type": "any"}
    elif isinstance(choice, dict):
        if choice.get("type") != "function":
            raise CapabilityError("tool_choice", f"tool_choice type '{choice.get('type')}' has no Anthropic "
                                  "equivalent", "tool_choice.type")
        function = as_dict(choice.get("function"), "tool_choice.function")
        anthropic_choice = {"type": "tool", "name": as_str(function.get("name"), "tool_choice.function.name")}
    elif choice is not None:
        raise RequestShapeError("tool_choice must be auto, none, required or a function", "tool_choice")
    if body.get("parallel_tool_calls") is False and out.get("tools"):
        anthropic_choice = anthropic_choice or {"type": "auto"}
        if anthropic_choice["type"] != "none":
            anthropic_choice["disable_parallel_tool_use"] = True
    if anthropic_choice is not None:
        out["tool_choice"] = anthropic_choice


def _response_format(response_format: Any, out: dict[str, Any], system: list[dict[str, Any]]) -> None:
    if response_format is None:
        return
    response_format = as_dict(response_format, "response_format")
    kind = response_format.get("type")
    if kind == "json_schema":
        spec = as_dict(response_format.get("json_schema"), "response_format.json_schema")
        schema = as_dict(spec.get("schema"), "response_format.json_schema.schema")
        out["output_config"] = {"format": {"type": "json_schema", "schema": schema}}
    elif kind == "json_object":
        # Anthropic has no schema-less JSON mode; the instruction asks for it and validation checks it.
        system.append({"type": "text", "text": JSON_OBJECT_INSTRUCTION})
    elif kind != "text":
        raise RequestShapeError(f"unknown response_format type '{kind}'", "response_format.type")


def _thinking(body: Mapping[str, Any], out: dict[str, Any], model: ModelSpec, *, turned_off: bool) -> None:
    effort = body.get("reasoning_effort")
    if effort is None:
        return
    if effort == "none":
        out["thinking"] = {"type": "disabled"}
        return
    budget = thinking_budget(effort)
    if turned_off:  # the final tool turn lost its thinking (thinking_turns): valid only with thinking off
        out["thinking"] = {"type": "disabled"}
        return
    tool_choice = out.get("tool_choice", {})
    if tool_choice.get("type") in ("any", "tool"):
        raise CapabilityError("tool_choice", "Anthropic cannot force tool use while thinking", "tool_choice")
    if out.get("temperature") not in (None, 1):
        raise CapabilityError("temperature", "Anthropic requires temperature 1 while thinking", "temperature")
    if out.get("top_p") is not None and out["top_p"] < 0.95:
        raise CapabilityError("top_p", "Anthropic requires top_p of at least 0.95 while thinking", "top_p")
    # OpenAI counts reasoning inside max_completion_tokens, Anthropic thinking inside max_tokens: the
    # same budget. When it leaves no room for the answer, the answer's room is added on top.
    max_tokens: int = out["max_tokens"]
    if budget >= max_tokens:
        max_tokens = budget + max_tokens
        if model.max_output_tokens:
            max_tokens = min(max_tokens, model.max_output_tokens)
        budget = min(budget, max_tokens - 1)
        if budget < MIN_ANTHROPIC_BUDGET:
            raise CapabilityError(
                "reasoning", f"thinking needs max tokens above {MIN_ANTHROPIC_BUDGET} on Anthropic", "max_tokens"
            )
        out["max_tokens"] = max_tokens
    out["thinking"] = {"type": "enabled", "budget_tokens": budget}
