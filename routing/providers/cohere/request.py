"""OpenAI chat completions request -> Cohere Chat v2 request (``POST /v2/chat``).

Cohere v2 is close to OpenAI's shape: the same roles (``developer`` becomes ``system``), tool calls with
JSON-string arguments and tool results by ``tool_call_id``. The differences handled here: ``top_p`` is
``p``, ``top_k`` is ``k``, ``stop`` is ``stop_sequences``; an assistant's text beside its tool calls goes
in ``tool_plan``; ``tool_choice`` is ``REQUIRED`` or ``NONE`` only (a named function is sent as the only
tool, required); a JSON schema goes in ``response_format.json_schema`` with type ``json_object``; and
``reasoning_effort`` becomes ``thinking`` with a token budget.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from routing.core.table import ModelSpec
from routing.providers.common.options import OptionRead, asks_for_audio, copy_options, max_output_tokens, stop_sequences
from routing.providers.common.reasoning import thinking_budget
from routing.providers.common.shape import (
    OPENAI_CHAT_FIELDS,
    OPENAI_IGNORABLE_HINTS,
    as_dict,
    as_int,
    as_list,
    as_number,
    as_str,
    assistant_texts,
    is_set,
    refuse_unknown_keys,
    text_of,
)
from routing.providers.errors import CapabilityError, RequestShapeError
from routing.providers.pivot.messages import chat_messages

_TARGET = "Cohere"
_OPTIONS: tuple[OptionRead, ...] = (
    ("temperature", "temperature", as_number),
    ("top_p", "p", as_number),
    ("presence_penalty", "presence_penalty", as_number),
    ("frequency_penalty", "frequency_penalty", as_number),
    ("top_k", "k", as_int),
    ("seed", "seed", as_int),
)


def openai_to_cohere(body: Mapping[str, Any], *, model: ModelSpec, stream: bool) -> dict[str, Any]:
    """The Cohere Chat v2 request equivalent to an OpenAI chat body, for ``model``."""
    refuse_unknown_keys(body, known=OPENAI_CHAT_FIELDS, target=_TARGET, ignorable=OPENAI_IGNORABLE_HINTS)
    for key in ("logit_bias", "logprobs", "top_logprobs"):
        if is_set(body.get(key)):
            raise CapabilityError(key, f"'{key}' is not translated for {_TARGET}", key)
    if asks_for_audio(body):
        raise CapabilityError("audio", "audio output is not translated for Cohere", "modalities")
    n = body.get("n")
    if n is not None and as_int(n, "n") != 1:
        raise CapabilityError("n", "Cohere returns one answer per request: n must be 1", "n")

    out: dict[str, Any] = {
        "model": model.upstream,
        "messages": _messages(as_list(body.get("messages"), "messages")),
        "stream": stream,
    }
    copy_options(body, out, _OPTIONS)
    max_tokens = max_output_tokens(body)
    if max_tokens is not None:
        out["max_tokens"] = max_tokens
    stop = stop_sequences(body)
    if stop is not None:
        out["stop_sequences"] = stop
    tools = [_tool(tool, f"tools[{i}]") for i, tool in enumerate(as_list(body.get("tools") or [], "tools"))]
    if tools:
        out["tools"] = tools
    if body.get("tool_choice") is not None:
        _tool_choice(body["tool_choice"], out)
    response_format = body.get("response_format")
    if response_format is not None:
        formatted = _response_format(as_dict(response_format, "response_format"))
        if formatted is not None:
            out["response_format"] = formatted
    effort = body.get("reasoning_effort")
    if effort == "none":
        out["thinking"] = {"type": "disabled"}
    elif effort is not None:
        budget = thinking_budget(effort)
        out["thinking"] = {"type": "enabled", "token_budget": budget}
    return out


def _messages(messages: list[Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for role, message, path in chat_messages(messages):
        if role == "system":
            out.append({"role": "system", "content": text_of(message.get("content"), f"{path}.content")})
        elif role == "user":
            out.append({"role": "user", "content": _user_content(message.get("content"), f"{path}.content")})
        elif role == "assistant":
            out.append(_assistant(message, path))
        else:
            out.append({
                "role": "tool",
                "tool_call_id": as_str(message.get("tool_call_id"), f"{path}.tool_call_id"),
                "content": text_of(message.get("content"), f"{path}.content"),
            })
    return out


def _user_content(content: Any, path: str) -> str | list[dict[str, Any]]:
    if isinstance(content, str):
        return content
    parts: list[dict[str, Any]] = []
    for j, part in enumerate(as_list(content, path)):
        part_path = f"{path}[{j}]"
        part = as_dict(part, part_path)
        kind = part.get("type")
        if kind == "text":
            parts.append({"type": "text", "text": as_str(part.get("text"), f"{part_path}.text")})
        elif kind == "image_url":
            image = part.get("image_url")
            url = as_str(image.get("url") if isinstance(image, dict) else image, f"{part_path}.image_url.url")
            image_out: dict[str, Any] = {"url": url}
            if isinstance(image, dict) and isinstance(image.get("detail"), str):
                image_out["detail"] = image["detail"]
            parts.append({"type": "image_url", "image_url": image_out})
        elif kind in ("input_audio", "file"):
            raise CapabilityError("audio" if kind == "input_audio" else "file",
                                  f"'{kind}' content is not translated for Cohere", f"{part_path}.type")
        else:
            raise RequestShapeError(f"unknown content part type '{kind}'", f"{part_path}.type")
    return parts


def _assistant(message: dict[str, Any], path: str) -> dict[str, Any]:
    text = "".join(assistant_texts(message, path))
    calls = []
    for k, call in enumerate(as_list(message.get("tool_calls") or [], f"{path}.tool_calls")):
        call_path = f"{path}.tool_calls[{k}]"
        call = as_dict(call, call_path)
        if call.get("type", "function") != "function":
            raise CapabilityError("tools", "custom tool calls have no Cohere equivalent", f"{call_path}.type")
        function = as_dict(call.get("function"), f"{call_path}.function")
        arguments = function.get("arguments")
        calls.append({
            "id": as_str(call.get("id"), f"{call_path}.id"),
            "type": "function",
            "function": {
                "name": as_str(function.get("name"), f"{call_path}.function.name"),
                "arguments": as_str(arguments, f"{call_path}.function.arguments") if arguments else "{}",
            },
        })
    out: dict[str, Any] = {"role": "assistant"}
    if calls:
        out["tool_calls"] = calls
        if text:
            out["tool_plan"] = text  # Cohere's place for the words that come with tool calls
    else:
        out["content"] = text
    return out


def _tool(tool: Any, path: str) -> dict[str, Any]:
    tool = as_dict(tool, path)
    if tool.get("type", "function") != "function":
        raise CapabilityError("tools", f"tool type '{tool.get('type')}' has no Cohere equivalent", f"{path}.type")
    function = as_dict(tool.get("function"), f"{path}.function")
    out: dict[str, Any] = {"name": as_str(function.get("name"), f"{path}.function.name")}
    if isinstance(function.get("description"), str):
        out["description"] = function["description"]
    if function.get("parameters") is not None:
        out["parameters"] = as_dict(function["parameters"], f"{path}.function.parameters")
    return {"type": "function", "function": out}


def _tool_choice(choice: Any, out: dict[str, Any]) -> None:
    if choice == "auto":
        return
    if choice == "none":
        out["tool_choice"] = "NONE"
        return
    if choice == "required":
        out["tool_choice"] = "REQUIRED"
        return
    if isinstance(choice, dict) and choice.get("type") == "function":
        # Cohere cannot name the function to call: the named tool is sent alone, and a call is required.
        name = as_str(as_dict(choice.get("function"), "tool_choice.function").get("name"), "tool_choice.function.name")
        named = [tool for tool in out.get("tools", []) if tool["function"]["name"] == name]
        if not named:
            raise RequestShapeError(f"tool_choice names '{name}', which is not in tools", "tool_choice.function.name")
        out["tools"] = named
        out["tool_choice"] = "REQUIRED"
        return
    if isinstance(choice, dict):
        raise CapabilityError("tool_choice", f"tool_choice type '{choice.get('type')}' has no Cohere equivalent",
                              "tool_choice.type")
    raise RequestShapeError("tool_choice must be auto, none, required or a function", "tool_choice")


def _response_format(response_format: dict[str, Any]) -> dict[str, Any] | None:
    kind = response_format.get("type")
    if kind == "text":
        return None
    if kind == "json_object":
        return {"type": "json_object"}
    if kind == "json_schema":
        spec = as_dict(response_format.get("json_schema"), "response_format.json_schema")
        schema = as_dict(spec.get("schema"), "response_format.json_schema.schema")
        return {"type": "json_object", "json_schema": schema}
    raise RequestShapeError(f"unknown response_format type '{kind}'", "response_format.type")
