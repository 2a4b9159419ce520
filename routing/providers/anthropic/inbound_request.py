"""Anthropic Messages request -> OpenAI chat completions request.

The OpenAI chat format is the pivot: an Anthropic client's request to an OpenAI-compatible provider goes
through here, and so does one to Gemini (then on through openai_to_gemini). Every refusal names the path
in the Anthropic body the client sent. The result is target-neutral except for ``top_k``, which the OpenAI
format lacks but Gemini has: it rides along and the OpenAI adapters refuse it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from routing.core.table import ModelSpec
from routing.providers.common.ids import openai_upstream_tool_id
from routing.providers.common.media import data_url
from routing.providers.common.reasoning import EFFORT_FROM_ANTHROPIC, effort_for_budget
from routing.providers.common.shape import as_dict, as_int, as_list, as_str, refuse_unknown_keys
from routing.providers.errors import CapabilityError, RequestShapeError

_KNOWN = frozenset(
    {
        "model", "messages", "system", "max_tokens", "stop_sequences", "temperature", "top_p", "top_k",
        "tools", "tool_choice", "thinking", "output_config", "output_format", "metadata", "stream",
    }
)
# Caching and scheduling hints: they change cost or speed, never what a correct answer is.
_IGNORABLE = frozenset({"cache_control", "service_tier", "speed", "diagnostics"})
_TARGET = "OpenAI chat"


def anthropic_to_openai(body: Mapping[str, Any], *, model: ModelSpec) -> dict[str, Any]:
    """The OpenAI chat request equivalent to an Anthropic Messages body, for ``model``."""
    refuse_unknown_keys(body, known=_KNOWN, target=_TARGET, ignorable=_IGNORABLE)
    messages: list[dict[str, Any]] = []
    system = _system_text(body.get("system"))
    if system:
        messages.append({"role": "system", "content": system})
    for i, message in enumerate(as_list(body.get("messages"), "messages")):
        messages.extend(_message(message, f"messages[{i}]"))
    out: dict[str, Any] = {"model": model.upstream, "messages": messages}

    if body.get("max_tokens") is not None:
        # Reasoning models refuse the older max_tokens; most other OpenAI-compatible servers know only it.
        key = "max_completion_tokens" if "reasoning" in model.capabilities else "max_tokens"
        out[key] = as_int(body["max_tokens"], "max_tokens")
    stop = body.get("stop_sequences")
    if stop:
        out["stop"] = [as_str(s, f"stop_sequences[{i}]") for i, s in enumerate(as_list(stop, "stop_sequences"))]
    for key in ("temperature", "top_p", "top_k"):
        if body.get(key) is not None:
            out[key] = body[key]
    tools = body.get("tools")
    if tools:
        out["tools"] = [_tool(tool, f"tools[{i}]") for i, tool in enumerate(as_list(tools, "tools"))]
    if body.get("tool_choice") is not None:
        _tool_choice(as_dict(body["tool_choice"], "tool_choice"), out)
    _reasoning_and_format(body, out)
    metadata = body.get("metadata")
    if isinstance(metadata, dict) and isinstance(metadata.get("user_id"), str):
        out["user"] = metadata["user_id"]
    return out


def _system_text(system: Any) -> str:
    if system is None or isinstance(system, str):
        return system or ""
    texts = []
    for i, block in enumerate(as_list(system, "system")):
        block = as_dict(block, f"system[{i}]")
        if block.get("type") != "text":
            raise RequestShapeError("system blocks must be text", f"system[{i}].type")
        texts.append(as_str(block.get("text"), f"system[{i}].text"))
    return "\n\n".join(texts)


def _blocks(content: Any, path: str) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [as_dict(block, f"{path}[{j}]") for j, block in enumerate(as_list(content, path))]


def _message(message: Any, path: str) -> list[dict[str, Any]]:
    message = as_dict(message, path)
    role = message.get("role")
    if role == "user":
        return _user_message(_blocks(message.get("content"), f"{path}.content"), f"{path}.content")
    if role == "assistant":
        return [_assistant_message(_blocks(message.get("content"), f"{path}.content"), f"{path}.content")]
    raise RequestShapeError("role must be 'user' or 'assistant'", f"{path}.role")


def _user_message(blocks: list[dict[str, Any]], path: str) -> list[dict[str, Any]]:
    """Tool results become ``tool`` messages, which OpenAI wants right after the assistant's tool calls;
    the rest of the turn (and any image or document a tool returned) follows as one user message."""
    tool_messages: list[dict[str, Any]] = []
    moved_parts: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    for j, block in enumerate(blocks):
        block_path = f"{path}[{j}]"
        kind = block.get("type")
        if kind == "tool_result":
            tool_message, attachments = _tool_result(block, block_path)
            tool_messages.append(tool_message)
            if attachments:
                label = f"[attachments returned by tool call {tool_message['tool_call_id']}]"
                moved_parts.append({"type": "text", "text": label})
                moved_parts.extend(attachments)
        else:
            parts.extend(_input_part(block, block_path))
    out = tool_messages
    user_parts = moved_parts + parts
    if user_parts or not tool_messages:
        out.append({"role": "user", "content": _compact(user_parts)})
    return out


def _compact(parts: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    """A lone text part as a plain string: some OpenAI-compatible servers accept only strings."""
    if len(parts) == 1 and parts[0]["type"] == "text":
        text: str = parts[0]["text"]
        return text
    return parts


def _input_part(block: dict[str, Any], path: str) -> list[dict[str, Any]]:
    kind = block.get("type")
    if kind == "text":
        return [{"type": "text", "text": as_str(block.get("text"), f"{path}.text")}]
    if kind == "image":
        return [_image_part(block, path)]
    if kind == "document":
        return _document_parts(block, path)
    if kind in ("thinking", "redacted_thinking", "tool_use"):
        raise RequestShapeError(f"a '{kind}' block belongs in an assistant message", f"{path}.type")
    raise CapabilityError(str(kind), f"content block type '{kind}' has no equivalent in the {_TARGET} format",
                          f"{path}.type")


def _image_part(block: dict[str, Any], path: str) -> dict[str, Any]:
    source = as_dict(block.get("source"), f"{path}.source")
    kind = source.get("type")
    if kind == "base64":
        media_type = as_str(source.get("media_type"), f"{path}.source.media_type")
        url = data_url(media_type, as_str(source.get("data"), f"{path}.source.data"))
    elif kind == "url":
        url = as_str(source.get("url"), f"{path}.source.url")
    else:
        raise CapabilityError("image", f"image source type '{kind}' can only be sent to Anthropic",
                              f"{path}.source.type")
    return {"type": "image_url", "image_url": {"url": url}}


def _document_parts(block: dict[str, Any], path: str) -> list[dict[str, Any]]:
    citations = block.get("citations")
    if isinstance(citations, dict) and citations.get("enabled"):
        raise CapabilityError("citations", "document citations can only be produced by Anthropic",
                              f"{path}.citations")
    source = as_dict(block.get("source"), f"{path}.source")
    kind = source.get("type")
    parts: list[dict[str, Any]] = []
    if isinstance(block.get("context"), str):
        parts.append({"type": "text", "text": block["context"]})
    if kind == "base64":
        media_type = as_str(source.get("media_type"), f"{path}.source.media_type")
        title = block.get("title") if isinstance(block.get("title"), str) else "document.pdf"
        file_data = data_url(media_type, as_str(source.get("data"), f"{path}.source.data"))
        parts.append({"type": "file", "file": {"filename": title, "file_data": file_data}})
    elif kind == "text":
        parts.append({"type": "text", "text": as_str(source.get("data"), f"{path}.source.data")})
    elif kind == "content":
        for k, inner in enumerate(_blocks(source.get("content"), f"{path}.source.content")):
            parts.extend(_input_part(inner, f"{path}.source.content[{k}]"))
    else:
        raise CapabilityError("file", f"document source type '{kind}' can only be sent to Anthropic",
                              f"{path}.source.type")
    return parts


def _tool_result(block: dict[str, Any], path: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    # The ids an OpenAI-format upstream issued come back as toolu_ ids (routing.providers.common.ids).
    tool_call_id = openai_upstream_tool_id(as_str(block.get("tool_use_id"), f"{path}.tool_use_id"))
    content = block.get("content")
    texts: list[str] = []
    attachments: list[dict[str, Any]] = []
    if content is not None:
        for k, inner in enumerate(_blocks(content, f"{path}.content")):
            inner_path = f"{path}.content[{k}]"
            if inner.get("type") == "text":
                texts.append(as_str(inner.get("text"), f"{inner_path}.text"))
            else:
                attachments.extend(_input_part(inner, inner_path))
    text = "\n".join(texts)
    if block.get("is_error"):
        # OpenAI has no error flag on tool results; the model still has to learn that the call failed.
        text = f"Error: {text}" if text else "Error"
    return {"role": "tool", "tool_call_id": tool_call_id, "content": text}, attachments


def _assistant_message(blocks: list[dict[str, Any]], path: str) -> dict[str, Any]:
    texts: list[str] = []
    tool_calls: list[dict[str, Any]] = []
    for j, block in enumerate(blocks):
        block_path = f"{path}[{j}]"
        kind = block.get("type")
        if kind == "text":
            texts.append(as_str(block.get("text"), f"{block_path}.text"))
        elif kind == "tool_use":
            tool_calls.append(
                {
                    "id": openai_upstream_tool_id(as_str(block.get("id"), f"{block_path}.id")),
                    "type": "function",
                    "function": {
                        "name": as_str(block.get("name"), f"{block_path}.name"),
                        "arguments": json.dumps(block.get("input") or {}, ensure_ascii=False),
                    },
                }
            )
        elif kind in ("thinking", "redacted_thinking"):
            continue  # earlier reasoning: OpenAI chat has no input field for it, and models do not need it
        else:
            raise CapabilityError(str(kind), f"assistant block type '{kind}' has no equivalent in the "
                                  f"{_TARGET} format", f"{block_path}.type")
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts) if texts else None}
    if tool_calls:
        message["tool_calls"] = tool_calls
    elif message["content"] is None:
        message["content"] = ""
    return message


def _tool(tool: Any, path: str) -> dict[str, Any]:
    tool = as_dict(tool, path)
    kind = tool.get("type")
    if kind not in (None, "custom"):
        raise CapabilityError("tools", f"Anthropic server tool '{kind}' can only run on Anthropic", f"{path}.type")
    function: dict[str, Any] = {"name": as_str(tool.get("name"), f"{path}.name")}
    if isinstance(tool.get("description"), str):
        function["description"] = tool["description"]
    function["parameters"] = as_dict(tool.get("input_schema"), f"{path}.input_schema")
    if tool.get("strict") is True:
        function["strict"] = True
    return {"type": "function", "function": function}


def _tool_choice(choice: dict[str, Any], out: dict[str, Any]) -> None:
    kind = choice.get("type")
    if kind == "auto":
        out["tool_choice"] = "auto"
    elif kind == "any":
        out["tool_choice"] = "required"
    elif kind == "none":
        out["tool_choice"] = "none"
    elif kind == "tool":
        out["tool_choice"] = {"type": "function", "function": {"name": as_str(choice.get("name"), "tool_choice.name")}}
    else:
        raise RequestShapeError(f"unknown tool_choice type '{kind}'", "tool_choice.type")
    if choice.get("disable_parallel_tool_use") and out.get("tools"):
        out["parallel_tool_calls"] = False


def _reasoning_and_format(body: Mapping[str, Any], out: dict[str, Any]) -> None:
    thinking = body.get("thinking")
    output_config = as_dict(body.get("output_config") or {}, "output_config")
    effort_word = output_config.get("effort")
    effort = None
    if effort_word is not None:
        effort = EFFORT_FROM_ANTHROPIC.get(effort_word) if isinstance(effort_word, str) else None
        if effort is None:
            raise RequestShapeError(f"unknown effort '{effort_word}'", "output_config.effort")
    if thinking is not None:
        thinking = as_dict(thinking, "thinking")
        kind = thinking.get("type")
        if kind == "enabled" and effort is None:
            effort = effort_for_budget(as_int(thinking.get("budget_tokens"), "thinking.budget_tokens"))
        elif kind in ("adaptive", "between_tools") and effort is None:
            effort = "medium"
        elif kind not in ("enabled", "adaptive", "between_tools", "disabled"):
            raise RequestShapeError(f"unknown thinking type '{kind}'", "thinking.type")
    if effort is not None:
        out["reasoning_effort"] = effort
    # GA: output_config.format; the structured-outputs beta sent the same object as top-level output_format.
    where = "output_config.format"
    output_format = output_config.get("format")
    if output_format is None and body.get("output_format") is not None:
        where, output_format = "output_format", body.get("output_format")
    if output_format is not None:
        output_format = as_dict(output_format, where)
        if output_format.get("type") != "json_schema":
            raise RequestShapeError(f"{where}.type must be 'json_schema'", f"{where}.type")
        schema = as_dict(output_format.get("schema"), f"{where}.schema")
        out["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": "response", "schema": schema, "strict": True},
        }
