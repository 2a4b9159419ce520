"""OpenAI Responses requests (``POST /v1/responses``): the checked body, its input as items, and the
conversation items a stored response keeps.

Every refusal here names the field in the client's Responses body (``input[2].content[0].type``), and the
rules are the same whichever provider the request ends up at: a request is valid or not before anything is
routed. What no provider behind the gateway can serve (OpenAI's built-in tools, background runs, stored
prompts, conversations and file ids, which live in one OpenAI account) is refused by name.

A conversation is kept as Responses *input* items (messages with text and images, ``function_call`` and
``function_call_output``): the answer of one turn is stored as the items a client would send back, so the
next turn's input is the stored conversation followed by its own input, for any provider kind.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from routing.core.answer import Answer
from routing.providers.common.shape import as_dict, as_list, as_str
from routing.providers.common.thinking_ids import split_payload
from routing.providers.errors import CapabilityError, RequestShapeError

_KNOWN = frozenset(
    {
        "model", "input", "instructions", "tools", "tool_choice", "text", "reasoning", "max_output_tokens",
        "temperature", "top_p", "metadata", "store", "stream", "previous_response_id", "parallel_tool_calls",
        "user",
    }
)
# Hints that change cost, caching or what is echoed, never what a correct answer is: accepted, and dropped by a
# translation to another format (an OpenAI-kind upstream receives them).
HINTS = frozenset(
    {
        "service_tier", "prompt_cache_key", "prompt_cache_retention", "safety_identifier", "include",
        "truncation", "stream_options", "background", "top_logprobs", "max_tool_calls",
    }
)
MESSAGE_ROLES = ("user", "assistant", "system", "developer")
_USER_PARTS = frozenset({"input_text", "input_image", "input_file"})
_ASSISTANT_PARTS = frozenset({"output_text", "refusal", "input_text"})
_TOOL_CHOICES = ("auto", "none", "required")
REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")
TEXT_FORMATS = ("text", "json_object", "json_schema")
MAX_REFERENCES = 1000  # item_reference items one request may send; bounds the one read that resolves them


@dataclass(frozen=True)
class ResponsesRequest:
    """A checked Responses body. ``items`` is this request's own input as items (a string input is one user
    message); the conversation of ``previous_response_id`` goes in front of them once it is loaded."""

    body: dict[str, Any]
    model: str
    items: list[dict[str, Any]]
    instructions: str | None
    stream: bool
    store: bool
    previous_response_id: str | None


def parse_responses_request(body: Mapping[str, Any]) -> ResponsesRequest:
    """The checked request, or RequestShapeError / CapabilityError naming the first field that is wrong."""
    for key in body:
        if key not in _KNOWN and key not in HINTS:
            raise CapabilityError(key, f"`{key}` is not supported by this gateway's Responses endpoint", key)
    model = body.get("model")
    if not isinstance(model, str) or not model.strip():
        raise RequestShapeError("model: required: the name of a model, virtual model or tier alias", "model")
    _check_hints(body)
    items = _input_items(body.get("input"))
    instructions = body.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise RequestShapeError("instructions must be a string", "instructions")
    for name in ("stream", "store", "parallel_tool_calls"):
        if body.get(name) is not None and not isinstance(body[name], bool):
            raise RequestShapeError(f"{name} must be true or false", name)
    for name in ("temperature", "top_p"):
        value = body.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise RequestShapeError(f"{name} must be a number", name)
    limit = body.get("max_output_tokens")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise RequestShapeError("max_output_tokens must be a positive integer", "max_output_tokens")
    if body.get("metadata") is not None:
        metadata = as_dict(body["metadata"], "metadata")
        for key, value in metadata.items():
            if not isinstance(value, str):
                raise RequestShapeError("metadata values must be strings", f"metadata.{key}")
    if body.get("user") is not None:
        as_str(body["user"], "user")
    previous = body.get("previous_response_id")
    if previous is not None and (not isinstance(previous, str) or not previous):
        raise RequestShapeError("previous_response_id must be the id of an earlier response", "previous_response_id")
    _check_tools(body.get("tools"))
    _check_tool_choice(body.get("tool_choice"))
    text_format(body)  # raises on a bad text.format
    reasoning_effort(body)  # raises on a bad reasoning.effort
    return ResponsesRequest(
        body=dict(body), model=model, items=items, instructions=instructions,
        stream=body.get("stream") is True, store=body.get("store") is not False, previous_response_id=previous,
    )


def _check_hints(body: Mapping[str, Any]) -> None:
    if body.get("background") not in (None, False):
        raise CapabilityError("background", "background responses are not supported by this gateway; send the "
                                            "request without `background`", "background")
    if body.get("top_logprobs") not in (None, 0):
        raise CapabilityError("top_logprobs", "log probabilities are not supported on the Responses endpoint",
                              "top_logprobs")
    if body.get("truncation") not in (None, "disabled", "auto"):
        raise RequestShapeError("truncation must be 'disabled' or 'auto'", "truncation")
    include = body.get("include")
    if include is not None:
        for i, value in enumerate(as_list(include, "include")):
            as_str(value, f"include[{i}]")


def _input_items(value: Any) -> list[dict[str, Any]]:
    if isinstance(value, str):
        return [{"type": "message", "role": "user", "content": value}]
    if value is None:
        raise RequestShapeError("input: required: a string or a list of input items", "input")
    items = [_item(item, f"input[{i}]") for i, item in enumerate(as_list(value, "input"))]
    if not items:
        raise RequestShapeError("input: required: a string or a non-empty list of input items", "input")
    if sum(1 for item in items if is_reference(item)) > MAX_REFERENCES:
        raise RequestShapeError(f"input: at most {MAX_REFERENCES} items of type 'item_reference' per request; send "
                                f"the others as items", "input")
    return items


def is_reference(item: Mapping[str, Any]) -> bool:
    """Whether an input item is an ``item_reference`` (an earlier output item named by its id)."""
    return item.get("type") == "item_reference"


def _item(item: Any, path: str) -> dict[str, Any]:
    item = as_dict(item, path)
    kind = item.get("type", "message" if "role" in item else None)
    if kind == "message":
        _message(item, path)
    elif kind == "function_call":
        as_str(item.get("call_id"), f"{path}.call_id")
        as_str(item.get("name"), f"{path}.name")
        as_str(item.get("arguments"), f"{path}.arguments")
    elif kind == "function_call_output":
        as_str(item.get("call_id"), f"{path}.call_id")
        output = item.get("output")
        if not isinstance(output, str):
            _parts(output, f"{path}.output", _USER_PARTS)
    elif kind == "reasoning":
        pass  # earlier reasoning: an OpenAI upstream reads it, a translation leaves it out
    elif kind == "item_reference":
        as_str(item.get("id"), f"{path}.id")  # an output item of a stored response, inlined before routing
    elif kind is None:
        raise RequestShapeError(f"{path}: expected an item with a `type` (or a message with a `role`)", f"{path}.type")
    else:
        raise CapabilityError(str(kind), f"input items of type '{kind}' are not supported by this gateway",
                              f"{path}.type")
    return item


def _message(item: dict[str, Any], path: str) -> None:
    role = item.get("role")
    if role not in MESSAGE_ROLES:
        raise RequestShapeError(f"role must be one of {', '.join(MESSAGE_ROLES)}", f"{path}.role")
    content = item.get("content")
    if isinstance(content, str):
        return
    _parts(content, f"{path}.content", _ASSISTANT_PARTS if role == "assistant" else _USER_PARTS)


def _parts(content: Any, path: str, allowed: frozenset[str]) -> None:
    for j, part in enumerate(as_list(content, path)):
        part_path = f"{path}[{j}]"
        part = as_dict(part, part_path)
        kind = part.get("type")
        if kind not in allowed:
            raise RequestShapeError(f"content part type '{kind}' is not allowed here (expected one of "
                                    f"{', '.join(sorted(allowed))})", f"{part_path}.type")
        if kind in ("input_text", "output_text"):
            as_str(part.get("text"), f"{part_path}.text")
        elif kind == "refusal":
            as_str(part.get("refusal"), f"{part_path}.refusal")
        elif kind == "input_image":
            if part.get("file_id") is not None:
                raise CapabilityError("file_id", "file ids live in one OpenAI account; send the image as image_url "
                                                 "(https or a base64 data URL)", f"{part_path}.file_id")
            as_str(part.get("image_url"), f"{part_path}.image_url")
        elif kind == "input_file":
            for name in ("file_id", "file_url"):
                if part.get(name) is not None:
                    raise CapabilityError(name, f"`{name}` is not supported; send the file inline as file_data",
                                          f"{part_path}.{name}")
            as_str(part.get("file_data"), f"{part_path}.file_data")


def _check_tools(tools: Any) -> None:
    if tools is None:
        return
    for i, tool in enumerate(as_list(tools, "tools")):
        path = f"tools[{i}]"
        tool = as_dict(tool, path)
        kind = tool.get("type")
        if kind != "function":
            raise CapabilityError("tools", f"tool type '{kind}' is not supported by this gateway (only function "
                                           f"tools are)", f"{path}.type")
        if not isinstance(tool.get("name"), str) or not tool["name"]:
            raise RequestShapeError("a function tool needs a non-empty name", f"{path}.name")
        if tool.get("parameters") is not None:
            as_dict(tool["parameters"], f"{path}.parameters")
        if tool.get("description") is not None:
            as_str(tool["description"], f"{path}.description")
        if tool.get("strict") is not None and not isinstance(tool["strict"], bool):
            raise RequestShapeError("strict must be true or false", f"{path}.strict")


def _check_tool_choice(choice: Any) -> None:
    if choice is None or choice in _TOOL_CHOICES:
        return
    if isinstance(choice, str):
        raise RequestShapeError(f"tool_choice must be one of {', '.join(_TOOL_CHOICES)} or a function",
                                "tool_choice")
    choice = as_dict(choice, "tool_choice")
    if choice.get("type") != "function":
        raise CapabilityError("tool_choice", f"tool_choice type '{choice.get('type')}' is not supported (only "
                                             f"'function' is)", "tool_choice.type")
    as_str(choice.get("name"), "tool_choice.name")


def text_format(body: Mapping[str, Any]) -> dict[str, Any] | None:
    """The checked ``text.format`` object, or None when the request asks for plain text (or says nothing)."""
    text = body.get("text")
    if text is None:
        return None
    text = as_dict(text, "text")
    verbosity = text.get("verbosity")
    if verbosity is not None and verbosity not in ("low", "medium", "high"):
        raise RequestShapeError("text.verbosity must be low, medium or high", "text.verbosity")
    fmt = text.get("format")
    if fmt is None:
        return None
    fmt = as_dict(fmt, "text.format")
    kind = fmt.get("type")
    if kind not in TEXT_FORMATS:
        raise RequestShapeError(f"text.format.type must be one of {', '.join(TEXT_FORMATS)}", "text.format.type")
    if kind == "json_schema":
        as_str(fmt.get("name"), "text.format.name")
        as_dict(fmt.get("schema"), "text.format.schema")
        if fmt.get("strict") is not None and not isinstance(fmt["strict"], bool):
            raise RequestShapeError("strict must be true or false", "text.format.strict")
    return None if kind == "text" else fmt


def reasoning_effort(body: Mapping[str, Any]) -> str | None:
    """The checked ``reasoning.effort``, or None."""
    reasoning = body.get("reasoning")
    if reasoning is None:
        return None
    reasoning = as_dict(reasoning, "reasoning")
    effort = reasoning.get("effort")
    if effort is not None and effort not in REASONING_EFFORTS:
        raise RequestShapeError(f"reasoning.effort must be one of {', '.join(REASONING_EFFORTS)}",
                                "reasoning.effort")
    return effort if isinstance(effort, str) else None


def answer_items(answer: Answer) -> list[dict[str, Any]]:
    """An answer as the input items that carry it into the next turn (its text, then its function calls).

    Reasoning text is left out: a provider's reasoning state does not transfer to another provider, and an OpenAI
    upstream refuses reasoning items it did not store itself. Claude's signed thinking, which Claude needs back
    in a tool loop, is kept as a reasoning item's ``encrypted_content`` before the text and the call it opened
    (thinking_ids; an OpenAI upstream is never sent it).
    """
    calls = [(split_payload(call.id), call) for call in answer.tool_calls]
    items: list[dict[str, Any]] = []
    if calls and calls[0][0][1]:
        items.append({"type": "reasoning", "summary": [], "encrypted_content": calls[0][0][1]})
    if answer.text:
        items.append({"type": "message", "role": "assistant",
                      "content": [{"type": "output_text", "text": answer.text}]})
    for number, ((call_id, payload), call) in enumerate(calls):
        if payload and number > 0:
            items.append({"type": "reasoning", "summary": [], "encrypted_content": payload})
        items.append({"type": "function_call", "call_id": call_id, "name": call.name,
                      "arguments": call.arguments or json.dumps({})})
    return items


def output_positions(output: list[dict[str, Any]], carried: list[dict[str, Any]]) -> list[tuple[str, int | None]]:
    """Each output item id the client was given, with the place in ``carried`` (``answer_items``) of the item that
    carries it into the next turn, or None for one that carries nothing (reasoning text, a second message).

    A message is carried by the answer's message, a function call by the carried call of the same ``call_id``, a
    reasoning item by the carried one with the same ``encrypted_content``.
    """
    message = next((n for n, item in enumerate(carried) if item.get("type") == "message"), None)
    calls = {item["call_id"]: n for n, item in enumerate(carried) if item.get("type") == "function_call"}
    sealed = {item["encrypted_content"]: n for n, item in enumerate(carried)
              if item.get("type") == "reasoning" and item.get("encrypted_content")}
    positions: list[tuple[str, int | None]] = []
    for item in output:
        item_id = item.get("id") if isinstance(item, dict) else None
        if not isinstance(item_id, str) or not item_id:
            continue
        kind = item.get("type")
        position: int | None = None
        if kind == "message":
            position, message = message, None  # the answer's text is one message: carried once
        elif kind == "function_call" and isinstance(item.get("call_id"), str):
            position = calls.get(split_payload(item["call_id"])[0])
        elif kind == "reasoning" and isinstance(item.get("encrypted_content"), str):
            position = sealed.get(item["encrypted_content"])
        positions.append((item_id, position))
    return positions
