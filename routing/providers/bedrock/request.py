"""OpenAI chat completions request -> Amazon Bedrock Converse request (``POST /model/{modelId}/converse``).

Converse has two roles (``user``, ``assistant``) that must alternate, content blocks (``text``, ``image`` as
base64 ``bytes``, ``toolUse``, ``toolResult``, ``reasoningContent``), the system prompt apart (``system``),
``inferenceConfig`` (``maxTokens``, ``temperature``, ``topP``, ``stopSequences``) and ``toolConfig``
(``tools[].toolSpec`` with ``inputSchema.json``, ``toolChoice`` auto | any | tool). What is done here:

- ``system``/``developer`` messages become ``system`` blocks (wherever they stood); ``tool`` messages become
  ``toolResult`` blocks of a user turn; consecutive turns of one role are merged, as Converse requires.
- Images: base64 data URLs of png, jpeg, gif or webp only; an http(s) URL is refused (Converse takes bytes or
  S3 locations and the gateway fetches nothing). Files (``file_data``, base64) become ``document`` blocks (pdf,
  csv, doc, docx, xls, xlsx, html, txt, md) named after the file name as Converse allows; file ids and audio
  are refused.
- ``tool_choice``: auto -> ``auto``, required -> ``any``, a named function -> ``tool``; ``none`` drops the
  tools (refused when the conversation already holds tool calls: Converse then requires ``toolConfig``).
  Tools named in the history but not declared are declared with an open schema, as Converse requires.
- ``response_format`` ``json_schema``: Converse has no schema mode for every model, so the schema becomes a
  forced tool named ``JSON_TOOL`` whose input is the answer (the response side turns that call back into the
  text). Refused beside the client's own tools (the model could not both call them and be forced).
  ``json_object`` adds an instruction to the system prompt, as for Anthropic; validation checks the JSON.
- Anthropic models on Bedrock (model id ``anthropic.*`` or a regional ``us.anthropic.*`` profile) also take
  ``top_k`` and ``reasoning_effort`` (a thinking budget) in ``additionalModelRequestFields``; other models
  refuse both. With thinking on, Claude's signed reasoning carried in the tool call ids (thinking_ids) is rebuilt
  as ``reasoningContent`` blocks in front of its ``toolUse``; a final tool turn without it is sent with thinking
  off (thinking_turns), and every tool id is sent as the upstream id it came from.
- Refused (no equivalent): ``n`` > 1, ``logit_bias``, ``logprobs``, ``top_logprobs``, ``seed``, non-zero
  ``presence_penalty`` / ``frequency_penalty``, audio output. Dropped hints: shape.OPENAI_IGNORABLE_HINTS.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from routing.core.table import ModelSpec
from routing.providers.anthropic.upstream_request import JSON_OBJECT_INSTRUCTION
from routing.providers.common.media import InlineData, guess_media_type, parse_data_url
from routing.providers.common.options import OptionRead, asks_for_audio, copy_options, max_output_tokens, stop_sequences
from routing.providers.common.reasoning import MIN_ANTHROPIC_BUDGET, thinking_budget
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
from routing.providers.common.thinking_ids import base_id, split_id
from routing.providers.common.thinking_turns import thinking_requested, thinking_turned_off
from routing.providers.errors import CapabilityError, RequestShapeError
from routing.providers.pivot.messages import chat_messages, merge_turn

_TARGET = "Bedrock Converse"
# The forced tool that carries a JSON-schema answer; a client tool may not take its name.
JSON_TOOL = "gomodel_json_output"
_IMAGE_FORMATS = {"image/png": "png", "image/jpeg": "jpeg", "image/jpg": "jpeg", "image/gif": "gif",
                  "image/webp": "webp"}
_DOCUMENT_FORMATS = {
    "application/pdf": "pdf", "text/csv": "csv", "application/msword": "doc",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
    "application/vnd.ms-excel": "xls", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": "xlsx",
    "text/html": "html", "text/plain": "txt", "text/markdown": "md",
}
_INFERENCE_OPTIONS: tuple[OptionRead, ...] = (("temperature", "temperature", as_number), ("top_p", "topP", as_number))
_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9\-()\[\] ]")
_OPEN_SCHEMA: dict[str, Any] = {"type": "object"}
# Default output room when thinking needs a budget and the client named no limit (Converse requires one then).
_THINKING_ANSWER_TOKENS = 4096


def is_anthropic_model(upstream: str) -> bool:
    """An Anthropic model on Bedrock: ``anthropic.claude-...``, or a cross-region profile ``us.anthropic...``."""
    head = upstream.rsplit("/", 1)[-1]  # an inference profile ARN ends with the profile id
    return head.startswith("anthropic.") or head.split(".", 1)[-1].startswith("anthropic.")


def openai_to_bedrock(body: Mapping[str, Any], *, model: ModelSpec) -> dict[str, Any]:
    """The Converse request equivalent to an OpenAI chat body, for ``model`` (the model id goes in the URL)."""
    refuse_unknown_keys(body, known=OPENAI_CHAT_FIELDS, target=_TARGET, ignorable=OPENAI_IGNORABLE_HINTS)
    for key in ("logit_bias", "logprobs", "top_logprobs", "seed", "presence_penalty", "frequency_penalty"):
        if is_set(body.get(key)):
            raise CapabilityError(key, f"'{key}' has no equivalent in the {_TARGET} format", key)
    if asks_for_audio(body):
        raise CapabilityError("audio", "audio output is not translated for Bedrock", "modalities")
    n = body.get("n")
    if n is not None and as_int(n, "n") != 1:
        raise CapabilityError("n", "Bedrock returns one answer per request: n must be 1", "n")
    anthropic = is_anthropic_model(model.upstream)
    thinking_on = anthropic and thinking_requested(body) and not thinking_turned_off(body)

    system, messages, used_tools = _conversation(as_list(body.get("messages"), "messages"), keep_thinking=thinking_on)
    out: dict[str, Any] = {"messages": messages}
    inference: dict[str, Any] = {}
    max_tokens = max_output_tokens(body)
    if max_tokens is not None:
        inference["maxTokens"] = max_tokens
    copy_options(body, inference, _INFERENCE_OPTIONS)
    stop = stop_sequences(body)
    if stop is not None:
        inference["stopSequences"] = stop
    extra: dict[str, Any] = {}
    if body.get("top_k") is not None:
        if not anthropic:
            raise CapabilityError("top_k", "top_k is translated for Anthropic models on Bedrock only", "top_k")
        extra["top_k"] = as_int(body["top_k"], "top_k")

    tools = [_tool(tool, f"tools[{i}]") for i, tool in enumerate(as_list(body.get("tools") or [], "tools"))]
    tool_config = _tool_config(tools, body.get("tool_choice"), used_tools)
    tool_config = _response_format(body.get("response_format"), tools, system, tool_config)
    if tool_config is not None:
        out["toolConfig"] = tool_config
    if not anthropic or thinking_on or not thinking_requested(body):
        _thinking(body.get("reasoning_effort"), anthropic, inference, extra, tool_config, model)
    else:  # thinking sent off for a final tool turn (thinking_turns): the effort word is still checked
        thinking_budget(body["reasoning_effort"])
    if system:
        out["system"] = [{"text": text} for text in system]
    if inference:
        out["inferenceConfig"] = inference
    if extra:
        out["additionalModelRequestFields"] = extra
    return out


def _conversation(messages: list[Any], *, keep_thinking: bool) -> tuple[list[str], list[dict[str, Any]], set[str]]:
    """(system texts, alternating turns, names of the tools the history calls); Claude's reasoning blocks are
    rebuilt when ``keep_thinking``."""
    system: list[str] = []
    turns: list[dict[str, Any]] = []
    used_tools: set[str] = set()
    document_names: set[str] = set()  # Converse wants each document of a conversation named apart
    for role, message, path in chat_messages(messages):
        if role == "system":
            text = text_of(message.get("content"), f"{path}.content")
            if text:
                system.append(text)
        elif role == "user":
            merge_turn(turns, "user", _user_blocks(message.get("content"), f"{path}.content", document_names))
        elif role == "assistant":
            merge_turn(turns, "assistant", _assistant_blocks(message, path, used_tools, keep_thinking=keep_thinking))
        else:
            merge_turn(turns, "user", [{"toolResult": {
                "toolUseId": base_id(as_str(message.get("tool_call_id"), f"{path}.tool_call_id")),
                # No "status": Converse takes it from Anthropic's models only, and "success" is the default.
                "content": [{"text": text_of(message.get("content"), f"{path}.content")}],
            }}])
    return system, turns, used_tools


def _user_blocks(content: Any, path: str, names: set[str]) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"text": content}]
    blocks: list[dict[str, Any]] = []
    for j, part in enumerate(as_list(content, path)):
        part_path = f"{path}[{j}]"
        part = as_dict(part, part_path)
        kind = part.get("type")
        if kind == "text":
            blocks.append({"text": as_str(part.get("text"), f"{part_path}.text")})
        elif kind == "image_url":
            image = part.get("image_url")
            url_path = f"{part_path}.image_url.url"
            blocks.append(_image(as_str(image.get("url") if isinstance(image, dict) else image, url_path), url_path))
        elif kind == "file":
            blocks.append(_document(as_dict(part.get("file"), f"{part_path}.file"), f"{part_path}.file", names))
        elif kind == "input_audio":
            raise CapabilityError("audio", "audio input is not translated for Bedrock", f"{part_path}.type")
        else:
            raise RequestShapeError(f"unknown content part type '{kind}'", f"{part_path}.type")
    return blocks


def _image(url: str, path: str) -> dict[str, Any]:
    inline = parse_data_url(url, path)
    if inline is None:
        raise CapabilityError("image", "Bedrock takes images as bytes: send the image as a base64 data URL", path)
    image_format = _IMAGE_FORMATS.get(inline.media_type)
    if image_format is None:
        raise CapabilityError("image", f"Bedrock takes png, jpeg, gif or webp images, not {inline.media_type}", path)
    return {"image": {"format": image_format, "source": {"bytes": inline.data}}}


def _document(file: dict[str, Any], path: str, names: set[str]) -> dict[str, Any]:
    """A base64 file part as a Converse ``document`` block (pdf, csv, doc, docx, xls, xlsx, html, txt, md)."""
    if file.get("file_id") is not None:
        raise CapabilityError("file", "OpenAI file ids cannot be sent to Bedrock", f"{path}.file_id")
    data_path = f"{path}.file_data"
    inline = parse_data_url(as_str(file.get("file_data"), data_path), data_path)
    filename = file.get("filename") if isinstance(file.get("filename"), str) else ""
    if inline is None:  # bare base64, as some clients send it: the file name tells the type
        inline = InlineData(guess_media_type(filename, "application/pdf"), file["file_data"])
    document_format = _DOCUMENT_FORMATS.get(inline.media_type)
    if document_format is None:
        raise CapabilityError("file", f"Bedrock takes pdf, csv, doc, docx, xls, xlsx, html, txt or md documents, "
                                      f"not {inline.media_type}", data_path)
    # A name of letters, digits, single spaces, hyphens, parentheses and brackets only, unique in the request.
    stem = " ".join(_NAME_UNSAFE.sub(" ", filename.rsplit(".", 1)[0]).split())[:80] or "document"
    name, n = stem, 1
    while name in names:
        n += 1
        name = f"{stem} ({n})"
    names.add(name)
    return {"document": {"format": document_format, "name": name, "source": {"bytes": inline.data}}}


def _assistant_blocks(message: dict[str, Any], path: str, used_tools: set[str], *,
                      keep_thinking: bool) -> list[dict[str, Any]]:
    text = "".join(assistant_texts(message, path))
    blocks: list[dict[str, Any]] = [{"text": text}] if text else []  # Converse refuses a blank text block
    for k, call in enumerate(as_list(message.get("tool_calls") or [], f"{path}.tool_calls")):
        call_path = f"{path}.tool_calls[{k}]"
        call = as_dict(call, call_path)
        if call.get("type", "function") != "function":
            raise CapabilityError("tools", "custom tool calls have no Bedrock equivalent", f"{call_path}.type")
        function = as_dict(call.get("function"), f"{call_path}.function")
        name = as_str(function.get("name"), f"{call_path}.function.name")
        arguments = function.get("arguments")
        try:
            tool_input = json.loads(as_str(arguments, f"{call_path}.function.arguments")) if arguments else {}
        except json.JSONDecodeError:
            raise RequestShapeError("tool call arguments must be a JSON object",
                                    f"{call_path}.function.arguments") from None
        if not isinstance(tool_input, dict):
            raise RequestShapeError("tool call arguments must be a JSON object", f"{call_path}.function.arguments")
        used_tools.add(name)
        call_id, thinking = split_id(as_str(call.get("id"), f"{call_path}.id"))
        if keep_thinking and thinking:
            # The first call's reasoning opened the turn (before its text); a later call's came right before it.
            rebuilt = [block.as_bedrock() for block in thinking]
            if k == 0:
                blocks[:0] = rebuilt
            else:
                blocks.extend(rebuilt)
        blocks.append({"toolUse": {"toolUseId": call_id, "name": name, "input": tool_input}})
    return blocks


def _tool(tool: Any, path: str) -> dict[str, Any]:
    tool = as_dict(tool, path)
    if tool.get("type", "function") != "function":
        raise CapabilityError("tools", f"tool type '{tool.get('type')}' has no Bedrock equivalent", f"{path}.type")
    function = as_dict(tool.get("function"), f"{path}.function")
    name = as_str(function.get("name"), f"{path}.function.name")
    if name == JSON_TOOL:
        raise RequestShapeError(f"the tool name '{JSON_TOOL}' is reserved by the gateway", f"{path}.function.name")
    spec: dict[str, Any] = {"name": name}
    if isinstance(function.get("description"), str) and function["description"]:
        spec["description"] = function["description"]
    parameters = function.get("parameters")
    schema = as_dict(parameters, f"{path}.function.parameters") if parameters is not None else _OPEN_SCHEMA
    spec["inputSchema"] = {"json": schema}
    return {"toolSpec": spec}


def _tool_config(tools: list[dict[str, Any]], choice: Any, used_tools: set[str]) -> dict[str, Any] | None:
    if choice == "none":
        if used_tools:
            raise CapabilityError("tool_choice", "Bedrock cannot forbid tool calls in a conversation that holds "
                                                 "tool calls (tool_choice none)", "tool_choice")
        return None
    declared = {tool["toolSpec"]["name"] for tool in tools}
    # Converse refuses toolUse/toolResult blocks unless their tools are declared: an Anthropic or OpenAI client
    # may replay a call without declaring its tool again.
    tools = tools + [{"toolSpec": {"name": name, "inputSchema": {"json": _OPEN_SCHEMA}}}
                     for name in sorted(used_tools - declared)]
    if not tools:
        if choice not in (None, "auto"):
            raise RequestShapeError("tool_choice needs tools", "tool_choice")
        return None
    config: dict[str, Any] = {"tools": tools}
    if choice is None or choice == "auto":
        return config
    if choice == "required":
        config["toolChoice"] = {"any": {}}
        return config
    if isinstance(choice, dict) and choice.get("type") == "function":
        name = as_str(as_dict(choice.get("function"), "tool_choice.function").get("name"), "tool_choice.function.name")
        if name not in declared:
            raise RequestShapeError(f"tool_choice names '{name}', which is not in tools", "tool_choice.function.name")
        config["toolChoice"] = {"tool": {"name": name}}
        return config
    if isinstance(choice, dict):
        raise CapabilityError("tool_choice", f"tool_choice type '{choice.get('type')}' has no Bedrock equivalent",
                              "tool_choice.type")
    raise RequestShapeError("tool_choice must be auto, none, required or a function", "tool_choice")


def _response_format(response_format: Any, tools: list[dict[str, Any]], system: list[str],
                     tool_config: dict[str, Any] | None) -> dict[str, Any] | None:
    """The tool configuration for a JSON answer: a forced tool for a schema; for a bare JSON object, the one
    given (an instruction is added to the system prompt instead)."""
    if response_format is None:
        return tool_config
    response_format = as_dict(response_format, "response_format")
    kind = response_format.get("type")
    if kind == "text":
        return tool_config
    if kind == "json_object":
        system.append(JSON_OBJECT_INSTRUCTION)
        return tool_config
    if kind != "json_schema":
        raise RequestShapeError(f"unknown response_format type '{kind}'", "response_format.type")
    spec = as_dict(response_format.get("json_schema"), "response_format.json_schema")
    schema = as_dict(spec.get("schema"), "response_format.json_schema.schema")
    if tools or tool_config is not None:
        raise CapabilityError("json_schema", "Bedrock carries a JSON schema as a forced tool call, which cannot be "
                                             "combined with other tools", "response_format")
    description = spec.get("description") if isinstance(spec.get("description"), str) else ""
    tool_spec: dict[str, Any] = {"name": JSON_TOOL, "inputSchema": {"json": schema},
                                 "description": description or "Give the answer as this tool's input."}
    return {"tools": [{"toolSpec": tool_spec}], "toolChoice": {"tool": {"name": JSON_TOOL}}}


def _thinking(effort: Any, anthropic: bool, inference: dict[str, Any], extra: dict[str, Any],
              tool_config: dict[str, Any] | None, model: ModelSpec) -> None:
    if effort is None or effort == "none":
        return
    if not anthropic:
        raise CapabilityError("reasoning", "reasoning_effort is translated for Anthropic models on Bedrock only",
                              "reasoning_effort")
    budget = thinking_budget(effort)
    if tool_config is not None and "toolChoice" in tool_config:
        raise CapabilityError("tool_choice", "Anthropic models cannot be forced to call a tool while thinking",
                              "tool_choice" if tool_config["toolChoice"].get("tool", {}).get("name") != JSON_TOOL
                              else "response_format")
    if inference.get("temperature") not in (None, 1, 1.0):
        raise CapabilityError("temperature", "Anthropic models require temperature 1 while thinking", "temperature")
    # As for Anthropic's own API: thinking counts inside maxTokens, so room for the answer is added on top.
    max_tokens = inference.get("maxTokens") or _THINKING_ANSWER_TOKENS
    if budget >= max_tokens:
        max_tokens = budget + max_tokens
        if model.max_output_tokens:
            max_tokens = min(max_tokens, model.max_output_tokens)
        budget = min(budget, max_tokens - 1)
        if budget < MIN_ANTHROPIC_BUDGET:
            raise CapabilityError("reasoning", f"thinking needs max tokens above {MIN_ANTHROPIC_BUDGET}",
                                  "max_tokens")
    inference["maxTokens"] = max_tokens
    extra["thinking"] = {"type": "enabled", "budget_tokens": budget}
