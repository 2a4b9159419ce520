"""The body of an OpenAI Responses request (``POST .../responses``) as a Prompt, refused as OpenAI refuses it.

``input`` is a string (one user message) or a list of items: messages (``role`` and string or part
``content``, with or without ``"type": "message"``), ``function_call`` and ``function_call_output`` items,
``reasoning`` and ``item_reference`` items. ``instructions`` counts as one more system message, so the same
conversation costs the same tokens as on the chat wire. A last item that hands back a tool result
(``function_call_output``) makes the turn a tool-result turn, exactly like a chat ``tool`` message: under
``tool_choice: auto`` it is answered in text. ``previous_response_id`` is refused as not found: the
simulator stores no responses.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from routing.simulator.prompt import Prompt, TextTally, ToolSpec, fingerprint, positive_int
from routing.simulator.wire.base import RequestError
from routing.simulator.wire.openai_rules import check_responses_tool_items

_ROLES = ("user", "assistant", "system", "developer")
_ITEM_TYPES = ("message", "function_call", "function_call_output", "reasoning", "item_reference")
_TEXT_PARTS = ("input_text", "output_text", "text")
_ATTACHMENT_PARTS = ("input_image", "input_file", "input_audio")
_REASONING_TOKENS = {"none": 0, "minimal": 0, "low": 64, "medium": 256, "high": 1024, "xhigh": 2048}
MIN_OUTPUT_TOKENS = 16  # OpenAI refuses a smaller max_output_tokens


def parse_responses_body(body: Mapping[str, Any], model: str) -> Prompt:
    """The Prompt of a Responses body; raises RequestError naming the field OpenAI would name."""
    if not model:
        raise RequestError("Missing required parameter: 'model'.", "model")
    previous = body.get("previous_response_id")
    if previous is not None:
        raise RequestError(f"Previous response with id '{previous}' not found.", "previous_response_id")
    items = _input_items(body.get("input"))
    tally = TextTally()
    instructions = body.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise RequestError("Invalid type for 'instructions': expected a string.", "instructions")
    tally.text(instructions)
    tools = _tools(body.get("tools"), tally)
    tool_choice, forced = _tool_choice(body.get("tool_choice"), tools)
    last_user = ""
    prefix = (0, 0)
    for index, item in enumerate(items):
        if index == len(items) - 1:
            prefix = (tally.chars, tally.attachments)
        text, from_user = _item_text(item, index, tally)
        if from_user:
            last_user = text
    check_responses_tool_items(items)
    max_output = body.get("max_output_tokens")
    if max_output is not None and (positive_int(max_output) or 0) < MIN_OUTPUT_TOKENS:
        raise RequestError(
            "Invalid 'max_output_tokens': integer below minimum value. Expected a value >= "
            f"{MIN_OUTPUT_TOKENS}, but got {max_output!r} instead.",
            "max_output_tokens",
        )
    schema, json_mode, text_format = _text_format(body.get("text"))
    reasoning = body.get("reasoning")
    effort = reasoning.get("effort") if isinstance(reasoning, Mapping) else None
    extra_messages = 1 if instructions else 0
    return Prompt(
        model=model,
        last_user_text=last_user,
        input_chars=tally.chars,
        message_count=len(items) + extra_messages,
        attachments=tally.attachments,
        tools=tools,
        tool_choice=tool_choice,
        forced_tool=forced,
        answers_tool_result=items[-1].get("type") == "function_call_output",
        output_schema=schema,
        json_mode=json_mode,
        max_tokens=positive_int(max_output),
        stream=body.get("stream") is True,
        reasoning_tokens=_REASONING_TOKENS.get(effort, 0) if isinstance(effort, str) else 0,
        prefix_key=fingerprint(instructions, body.get("tools"), items[:-1]) if len(items) > 1 or tools else None,
        prefix_chars=prefix[0],
        prefix_attachments=prefix[1],
        prefix_messages=len(items) - 1 + extra_messages,
        echo=_echo(body, text_format, tool_choice, forced),
    )


def _input_items(raw: Any) -> list[Mapping[str, Any]]:
    if raw is None:
        raise RequestError("Missing required parameter: 'input'.", "input")
    if isinstance(raw, str):
        return [{"type": "message", "role": "user", "content": raw}]
    if not isinstance(raw, list):
        raise RequestError(
            f"Invalid type for 'input': expected one of a string or array of input items, but got "
            f"{type(raw).__name__} instead.",
            "input",
        )
    if not raw:
        raise RequestError("Invalid 'input': empty array. Expected an array with minimum length 1.", "input")
    for index, item in enumerate(raw):
        if not isinstance(item, Mapping):
            raise RequestError(f"Invalid type for 'input[{index}]': expected an input item.", f"input[{index}]")
    return raw


def _item_text(item: Mapping[str, Any], index: int, tally: TextTally) -> tuple[str, bool]:
    """(the item's text, whether it is a user or tool turn), counting its text and attachments."""
    kind = item.get("type", "message")
    if kind not in _ITEM_TYPES:
        raise RequestError(
            f"Invalid value: {kind!r}. Supported values are: {', '.join(repr(t) for t in _ITEM_TYPES)}.",
            f"input[{index}].type",
        )
    if kind == "message":
        role = item.get("role")
        if role not in _ROLES:
            raise RequestError(
                f"Invalid value: {role!r}. Supported values are: 'assistant', 'system', 'developer', and 'user'.",
                f"input[{index}].role",
            )
        return _content_text(item.get("content"), tally), role == "user"
    if kind == "function_call":
        for field in ("call_id", "name", "arguments"):
            if not isinstance(item.get(field), str):
                raise RequestError(f"Missing required parameter: 'input[{index}].{field}'.", f"input[{index}].{field}")
        tally.json({"name": item["name"], "arguments": item["arguments"]})
        return "", False
    if kind == "function_call_output":
        if not isinstance(item.get("call_id"), str):
            raise RequestError(f"Missing required parameter: 'input[{index}].call_id'.", f"input[{index}].call_id")
        output = item.get("output")
        if output is None:
            raise RequestError(f"Missing required parameter: 'input[{index}].output'.", f"input[{index}].output")
        return _content_text(output, tally), True
    if kind == "reasoning":
        for part in item.get("summary") or []:
            if isinstance(part, Mapping):
                tally.text(part.get("text"))
    return "", False


def _content_text(content: Any, tally: TextTally) -> str:
    return tally.parts(content, text_kinds=_TEXT_PARTS, attachment_kinds=_ATTACHMENT_PARTS)


def _tools(raw: Any, tally: TextTally) -> tuple[ToolSpec, ...]:
    """The function tools; hosted tools (web search, file search) are counted but never called."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise RequestError("Invalid type for 'tools': expected an array.", "tools")
    tally.json(raw)
    tools = []
    for index, tool in enumerate(raw):
        if not isinstance(tool, Mapping) or not isinstance(tool.get("type"), str):
            raise RequestError(f"Missing required parameter: 'tools[{index}].type'.", f"tools[{index}].type")
        if tool["type"] != "function":
            continue
        name = tool.get("name")
        if not isinstance(name, str) or not name:
            raise RequestError(f"Missing required parameter: 'tools[{index}].name'.", f"tools[{index}].name")
        parameters = tool.get("parameters")
        tools.append(ToolSpec(name, parameters if isinstance(parameters, Mapping) else {"type": "object"}))
    return tuple(tools)


def _tool_choice(raw: Any, tools: tuple[ToolSpec, ...]) -> tuple[str, str | None]:
    if raw is None or raw in ("none", "auto"):
        return raw or "auto", None
    if raw == "required":
        if not tools:
            raise RequestError("Tool choice 'required' must be specified with 'tools' parameter.", "tool_choice")
        return "required", None
    name = raw.get("name") if isinstance(raw, Mapping) and raw.get("type") == "function" else None
    if not isinstance(name, str) or name not in {tool.name for tool in tools}:
        raise RequestError(
            "Invalid value for 'tool_choice': 'tool_choice' must be 'none', 'auto', 'required', or a function "
            "that is in 'tools'.",
            "tool_choice",
        )
    return "required", name


def _text_format(raw: Any) -> tuple[Mapping[str, Any] | None, bool, dict[str, Any]]:
    """(the schema the answer must satisfy, JSON mode, the format echoed in the answer)."""
    text_format = raw.get("format") if isinstance(raw, Mapping) else None
    if not isinstance(text_format, Mapping):
        return None, False, {"type": "text"}
    kind = text_format.get("type")
    if kind == "json_schema":
        if not isinstance(text_format.get("name"), str):
            raise RequestError("Missing required parameter: 'text.format.name'.", "text.format.name")
        schema = text_format.get("schema")
        if not isinstance(schema, Mapping):
            raise RequestError("Missing required parameter: 'text.format.schema'.", "text.format.schema")
        return schema, False, dict(text_format)
    if kind == "json_object":
        return None, True, {"type": "json_object"}
    if kind == "text":
        return None, False, {"type": "text"}
    raise RequestError(
        f"Invalid value: {kind!r}. Supported values are: 'text', 'json_object', and 'json_schema'.",
        "text.format.type",
    )


def _echo(body: Mapping[str, Any], text_format: dict[str, Any], tool_choice: str,
          forced: str | None) -> dict[str, Any]:
    """The request settings a Response object repeats."""
    reasoning = body.get("reasoning")
    return {
        "instructions": body.get("instructions"),
        "max_output_tokens": body.get("max_output_tokens"),
        "metadata": body.get("metadata") if isinstance(body.get("metadata"), Mapping) else {},
        "parallel_tool_calls": body.get("parallel_tool_calls", True),
        "reasoning": {"effort": reasoning.get("effort"), "summary": reasoning.get("summary")}
        if isinstance(reasoning, Mapping) else {"effort": None, "summary": None},
        "store": body.get("store", True),
        "temperature": body.get("temperature", 1.0),
        "text": {"format": text_format, "verbosity": "medium"},
        "tool_choice": {"type": "function", "name": forced} if forced else tool_choice,
        "tools": body.get("tools") or [],
        "top_p": body.get("top_p", 1.0),
        "truncation": body.get("truncation", "disabled"),
        "user": body.get("user"),
    }
