"""A Responses request -> the equivalent OpenAI chat completions body (the pivot every adapter reads).

The chat body is what the gateway routes on (tier classification, sessions, contracts and capability checks read
it) and what every provider kind but OpenAI's own receives, through its adapter. The items were checked by
``responses_request``; this only rewrites them:

- ``instructions`` -> a leading system message; ``developer`` messages -> system messages (not every provider
  format knows the developer role);
- ``input_text``/``output_text`` -> text, ``input_image`` -> ``image_url``, ``input_file`` -> ``file``;
- ``function_call`` items -> the assistant message's ``tool_calls`` (consecutive calls, and the text before
  them, make one assistant turn), ``function_call_output`` -> ``tool`` messages;
- ``reasoning`` items are left out (chat has no input field for earlier reasoning), but Claude's signed thinking
  in a reasoning item's ``encrypted_content`` goes into the id of the next function call of its turn, where the
  chat translations to Claude look for it (thinking_ids);
- ``max_output_tokens`` -> ``max_completion_tokens``, ``text.format`` -> ``response_format``,
  ``reasoning.effort`` -> ``reasoning_effort``, function tools -> chat tools; ``store`` and the other hints go.
"""

from __future__ import annotations

import re
from typing import Any

from routing.providers.common.thinking_ids import ThinkingBlock, decode_payload, id_with_thinking
from routing.providers.responses_api.inbound_request import ResponsesRequest, reasoning_effort, text_format


def responses_to_chat(request: ResponsesRequest, conversation: list[dict[str, Any]]) -> dict[str, Any]:
    """The chat body for ``request`` whose whole input (earlier turns included) is ``conversation``."""
    return _translate(request, conversation)[0]


def responses_param(chat_param: str | None, request: ResponsesRequest,
                    conversation: list[dict[str, Any]]) -> str | None:
    """The field of the client's Responses body that a path in its chat translation came from.

    An adapter names the chat body's field when it refuses a request (``messages[2].content[0]``); the client
    sent ``input[1].content[0]``. A message from the stored conversation is named ``previous_response_id``.
    Computed again only when a refusal needs it, so the request path does not pay for it.
    """
    if not chat_param:
        return chat_param
    match = _MESSAGE_PATH.match(chat_param)
    if match:
        paths = _translate(request, conversation)[1]
        index, rest = int(match.group(1)), match.group(2)
        if index >= len(paths):
            return "input"
        path = paths[index]
        if not rest.startswith(".content") or not path.startswith("input["):
            return path
        return path + rest[len(".content"):] if path.endswith(".output") else path + rest
    tool = _TOOL_PATH.match(chat_param)
    if tool:
        return tool.group(1) + tool.group(2)
    for chat_name, name in _RENAMED:
        if chat_param == chat_name or chat_param.startswith(chat_name + "."):
            return name
    return chat_param


_MESSAGE_PATH = re.compile(r"messages\[(\d+)\](.*)")
_TOOL_PATH = re.compile(r"(tools\[\d+\])(?:\.function)?(.*)")
_RENAMED = (("response_format", "text.format"), ("max_completion_tokens", "max_output_tokens"),
            ("max_tokens", "max_output_tokens"), ("reasoning_effort", "reasoning.effort"))


def _translate(request: ResponsesRequest, conversation: list[dict[str, Any]]) -> tuple[dict[str, Any], list[str]]:
    """The chat body, and for each of its messages the Responses field it came from."""
    body = request.body
    messages: list[dict[str, Any]] = []
    paths: list[str] = []
    if request.instructions:
        messages.append({"role": "system", "content": request.instructions})
        paths.append("instructions")
    earlier = len(conversation) - len(request.items)
    thinking: list[ThinkingBlock] = []  # from a reasoning item, for the next function call of its turn
    for number, item in enumerate(conversation):
        _add_item(messages, item, thinking)
        if len(messages) > len(paths):
            where = f"input[{number - earlier}]" if number >= earlier else "previous_response_id"
            if item.get("type") == "function_call_output" and number >= earlier:
                where += ".output"  # the tool message's content parts are the output's parts
            paths.append(where)
    out: dict[str, Any] = {"model": request.model, "messages": messages}
    if body.get("max_output_tokens") is not None:
        out["max_completion_tokens"] = body["max_output_tokens"]
    for key in ("temperature", "top_p", "user", "metadata", "prompt_cache_key", "safety_identifier"):
        if body.get(key) is not None:
            out[key] = body[key]
    tools = body.get("tools")
    if tools:
        out["tools"] = [_tool(tool) for tool in tools]
        if body.get("parallel_tool_calls") is not None:
            out["parallel_tool_calls"] = body["parallel_tool_calls"]
    choice = body.get("tool_choice")
    if choice is not None:
        out["tool_choice"] = choice if isinstance(choice, str) else {"type": "function",
                                                                     "function": {"name": choice["name"]}}
    fmt = text_format(body)
    if fmt is not None:
        out["response_format"] = _response_format(fmt)
    effort = reasoning_effort(body)
    if effort is not None:
        out["reasoning_effort"] = effort
    text = body.get("text")
    if isinstance(text, dict) and text.get("verbosity") is not None:
        out["verbosity"] = text["verbosity"]
    if request.stream:
        out["stream"] = True
    return out, paths


def _add_item(messages: list[dict[str, Any]], item: dict[str, Any], thinking: list[ThinkingBlock]) -> None:
    kind = item.get("type", "message")
    if kind == "reasoning":
        content = item.get("encrypted_content")
        decoded = decode_payload(content) if isinstance(content, str) else None
        if decoded is not None:
            thinking[:] = decoded[1]
        return  # its text: nothing to carry into a chat request
    if kind != "function_call" and not (kind == "message" and item.get("role") == "assistant"):
        thinking.clear()  # the turn it opened has ended
    if kind == "message":
        role = item["role"]
        if role == "assistant":
            messages.append({"role": "assistant", "content": _assistant_text(item["content"])})
        else:
            messages.append({"role": "system" if role == "developer" else role,
                             "content": _content(item["content"], single_text=role != "user")})
    elif kind == "function_call":
        call = {"id": id_with_thinking(item["call_id"], thinking), "type": "function",
                "function": {"name": item["name"], "arguments": item["arguments"]}}
        last = messages[-1] if messages else None
        if last is not None and last["role"] == "assistant" and "tool_calls" in last:
            last["tool_calls"].append(call)
        elif last is not None and last["role"] == "assistant" and isinstance(last.get("content"), str):
            last["tool_calls"] = [call]  # the text the model wrote before calling belongs to the same turn
            last["content"] = last["content"] or None
        else:
            messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        thinking.clear()
    elif kind == "function_call_output":
        output = item["output"]
        messages.append({"role": "tool", "tool_call_id": item["call_id"],
                         "content": output if isinstance(output, str) else _content(output, single_text=False)})


def _assistant_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(part.get("text") or part.get("refusal") or "" for part in content)


def _content(content: Any, *, single_text: bool) -> str | list[dict[str, Any]]:
    """Chat content for Responses parts; text alone becomes a plain string (every chat server takes one)."""
    if isinstance(content, str):
        return content
    parts = [_part(part) for part in content]
    if all(part["type"] == "text" for part in parts) and (single_text or len(parts) == 1):
        return "\n".join(part["text"] for part in parts) if single_text else parts[0]["text"]
    return parts


def _part(part: dict[str, Any]) -> dict[str, Any]:
    kind = part["type"]
    if kind in ("input_text", "output_text"):
        return {"type": "text", "text": part["text"]}
    if kind == "input_image":
        image: dict[str, Any] = {"url": part["image_url"]}
        if part.get("detail") in ("low", "high", "auto"):
            image["detail"] = part["detail"]
        return {"type": "image_url", "image_url": image}
    # input_file (the only other kind responses_request lets through for user content)
    file: dict[str, Any] = {"file_data": part["file_data"]}
    if isinstance(part.get("filename"), str):
        file["filename"] = part["filename"]
    return {"type": "file", "file": file}


def _tool(tool: dict[str, Any]) -> dict[str, Any]:
    function: dict[str, Any] = {"name": tool["name"]}
    if tool.get("description") is not None:
        function["description"] = tool["description"]
    function["parameters"] = tool.get("parameters") or {"type": "object", "properties": {}}
    if tool.get("strict") is not None:
        function["strict"] = tool["strict"]
    return {"type": "function", "function": function}


def _response_format(fmt: dict[str, Any]) -> dict[str, Any]:
    if fmt["type"] == "json_object":
        return {"type": "json_object"}
    spec: dict[str, Any] = {"name": fmt["name"], "schema": fmt["schema"]}
    if fmt.get("strict") is not None:
        spec["strict"] = fmt["strict"]
    if isinstance(fmt.get("description"), str):
        spec["description"] = fmt["description"]
    return {"type": "json_schema", "json_schema": spec}
