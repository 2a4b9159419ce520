"""OpenAI chat completions request -> Gemini generateContent request.

Gemini wants the system prompt as ``systemInstruction``, turns as ``contents`` with roles ``user`` and
``model``, tool calls as ``functionCall`` parts and their results as ``functionResponse`` parts that name
the function (not the call id), and sampling settings inside ``generationConfig``. Function schemas go in
``parametersJsonSchema`` and response schemas in ``responseJsonSchema``, which take plain JSON Schema.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from routing.core.table import ModelSpec
from routing.providers.common.media import AUDIO_MEDIA_TYPES, guess_media_type, parse_data_url
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
from routing.providers.common.tool_call_ids import SKIP_SIGNATURE, signature_from_id
from routing.providers.errors import CapabilityError, RequestShapeError
from routing.providers.pivot.messages import chat_messages, merge_turn

_TARGET = "Gemini"
_GENERATION_OPTIONS: tuple[OptionRead, ...] = (
    ("temperature", "temperature", as_number),
    ("top_p", "topP", as_number),
    ("top_k", "topK", as_number),
    ("seed", "seed", as_int),
    ("presence_penalty", "presencePenalty", as_number),
    ("frequency_penalty", "frequencyPenalty", as_number),
)


def openai_to_gemini(body: Mapping[str, Any], *, model: ModelSpec) -> dict[str, Any]:
    """The Gemini generateContent request equivalent to an OpenAI chat body, for ``model``."""
    refuse_unknown_keys(body, known=OPENAI_CHAT_FIELDS, target=_TARGET, ignorable=OPENAI_IGNORABLE_HINTS)
    for key in ("logit_bias", "logprobs", "top_logprobs"):
        if is_set(body.get(key)):
            raise CapabilityError(key, f"'{key}' is not translated for {_TARGET}", key)
    if asks_for_audio(body):
        raise CapabilityError("audio", "audio output is not translated for Gemini", "modalities")

    system, contents = _contents(as_list(body.get("messages"), "messages"))
    out: dict[str, Any] = {"contents": contents}
    if system:
        out["systemInstruction"] = {"parts": [{"text": text} for text in system]}
    generation = _generation_config(body)
    if generation:
        out["generationConfig"] = generation
    if body.get("tools"):
        declarations = [_declaration(tool, f"tools[{i}]") for i, tool in enumerate(as_list(body["tools"], "tools"))]
        out["tools"] = [{"functionDeclarations": declarations}]
    if body.get("tool_choice") is not None:
        out["toolConfig"] = {"functionCallingConfig": _calling_config(body["tool_choice"])}
    return out


def _generation_config(body: Mapping[str, Any]) -> dict[str, Any]:
    generation: dict[str, Any] = {}
    copy_options(body, generation, _GENERATION_OPTIONS)
    max_tokens = max_output_tokens(body)
    if max_tokens is not None:
        generation["maxOutputTokens"] = max_tokens
    stop = stop_sequences(body)
    if stop is not None:
        generation["stopSequences"] = stop
    n = body.get("n")
    if n is not None and as_int(n, "n") != 1:
        generation["candidateCount"] = n
    response_format = body.get("response_format")
    if response_format is not None:
        response_format = as_dict(response_format, "response_format")
        kind = response_format.get("type")
        if kind in ("json_object", "json_schema"):
            generation["responseMimeType"] = "application/json"
        if kind == "json_schema":
            spec = as_dict(response_format.get("json_schema"), "response_format.json_schema")
            generation["responseJsonSchema"] = as_dict(spec.get("schema"), "response_format.json_schema.schema")
        elif kind not in ("json_object", "text"):
            raise RequestShapeError(f"unknown response_format type '{kind}'", "response_format.type")
    effort = body.get("reasoning_effort")
    if effort == "none":
        generation["thinkingConfig"] = {"thinkingBudget": 0}
    elif effort is not None:
        budget = thinking_budget(effort)
        generation["thinkingConfig"] = {"thinkingBudget": budget, "includeThoughts": True}
    return generation


def _contents(messages: list[Any]) -> tuple[list[str], list[dict[str, Any]]]:
    system: list[str] = []
    contents: list[dict[str, Any]] = []
    function_names: dict[str, str] = {}  # tool call id -> function name: functionResponse needs the name
    for role, message, path in chat_messages(messages):
        if role == "system":
            text = text_of(message.get("content"), f"{path}.content")
            if text:
                system.append(text)
        elif role == "user":
            merge_turn(contents, "user", _user_parts(message.get("content"), f"{path}.content"), key="parts")
        elif role == "assistant":
            merge_turn(contents, "model", _model_parts(message, path, function_names), key="parts")
        else:
            merge_turn(contents, "user", [_function_response(message, path, function_names)], key="parts")
    return system, contents


def _user_parts(content: Any, path: str) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"text": content}]
    parts: list[dict[str, Any]] = []
    for j, part in enumerate(as_list(content, path)):
        part_path = f"{path}[{j}]"
        part = as_dict(part, part_path)
        kind = part.get("type")
        if kind == "text":
            parts.append({"text": as_str(part.get("text"), f"{part_path}.text")})
        elif kind == "image_url":
            image = part.get("image_url")
            url_path = f"{part_path}.image_url.url"
            url = as_str(image.get("url") if isinstance(image, dict) else image, url_path)
            parts.append(_media_part(url, url_path, "image/jpeg"))
        elif kind == "input_audio":
            audio = as_dict(part.get("input_audio"), f"{part_path}.input_audio")
            audio_format = as_str(audio.get("format"), f"{part_path}.input_audio.format")
            media_type = AUDIO_MEDIA_TYPES.get(audio_format, f"audio/{audio_format}")
            data = as_str(audio.get("data"), f"{part_path}.input_audio.data")
            parts.append({"inlineData": {"mimeType": media_type, "data": data}})
        elif kind == "file":
            file = as_dict(part.get("file"), f"{part_path}.file")
            if file.get("file_id") is not None:
                raise CapabilityError("file", "OpenAI file ids cannot be sent to Gemini", f"{part_path}.file.file_id")
            data_path = f"{part_path}.file.file_data"
            file_data = as_str(file.get("file_data"), data_path)
            inline = parse_data_url(file_data, data_path)
            if inline is None:
                filename = file.get("filename")
                media_type = guess_media_type(filename if isinstance(filename, str) else "", "application/pdf")
                parts.append({"inlineData": {"mimeType": media_type, "data": file_data}})
            else:
                parts.append({"inlineData": {"mimeType": inline.media_type, "data": inline.data}})
        else:
            raise RequestShapeError(f"unknown content part type '{kind}'", f"{part_path}.type")
    return parts


def _media_part(url: str, path: str, default_type: str) -> dict[str, Any]:
    inline = parse_data_url(url, path)
    if inline is not None:
        return {"inlineData": {"mimeType": inline.media_type, "data": inline.data}}
    if not url.startswith(("http://", "https://", "gs://")):
        raise RequestShapeError("a media URL must be http(s), gs:// or a base64 data URL", path)
    return {"fileData": {"mimeType": guess_media_type(url, default_type), "fileUri": url}}


def _model_parts(message: dict[str, Any], path: str, function_names: dict[str, str]) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = [{"text": text} for text in assistant_texts(message, path) if text]
    first_call = True
    for k, call in enumerate(as_list(message.get("tool_calls") or [], f"{path}.tool_calls")):
        call_path = f"{path}.tool_calls[{k}]"
        call = as_dict(call, call_path)
        if call.get("type", "function") != "function":
            raise CapabilityError("tools", "custom tool calls have no Gemini equivalent", f"{call_path}.type")
        function = as_dict(call.get("function"), f"{call_path}.function")
        call_id = as_str(call.get("id"), f"{call_path}.id")
        name = as_str(function.get("name"), f"{call_path}.function.name")
        function_names[call_id] = name
        arguments = _arguments(function.get("arguments"), f"{call_path}.function.arguments")
        call_part: dict[str, Any] = {"functionCall": {"name": name, "args": arguments}}
        signature = signature_from_id(call_id)
        if signature or first_call:
            # Gemini checks the signature of the first call of each step; calls made elsewhere have none.
            call_part["thoughtSignature"] = signature or SKIP_SIGNATURE
        first_call = False
        parts.append(call_part)
    return parts


def _arguments(arguments: Any, path: str) -> dict[str, Any]:
    if arguments in (None, ""):
        return {}
    try:
        value = json.loads(as_str(arguments, path))
    except (json.JSONDecodeError, RecursionError) as exc:
        raise RequestShapeError("tool call arguments must be a JSON object", path) from exc
    return as_dict(value, path)


def _function_response(message: dict[str, Any], path: str, function_names: dict[str, str]) -> dict[str, Any]:
    call_id = as_str(message.get("tool_call_id"), f"{path}.tool_call_id")
    name = function_names.get(call_id)
    if name is None:
        raise RequestShapeError("tool_call_id matches no earlier assistant tool call", f"{path}.tool_call_id")
    text = text_of(message.get("content"), f"{path}.content")
    # Gemini wants an object; a tool that answered with a JSON object is passed as that object.
    try:
        parsed = json.loads(text) if text[:1] == "{" else None
    except (json.JSONDecodeError, RecursionError):
        parsed = None
    response = parsed if isinstance(parsed, dict) else {"content": text}
    return {"functionResponse": {"name": name, "response": response}}


def _declaration(tool: Any, path: str) -> dict[str, Any]:
    tool = as_dict(tool, path)
    if tool.get("type", "function") != "function":
        raise CapabilityError("tools", f"tool type '{tool.get('type')}' has no Gemini equivalent", f"{path}.type")
    function = as_dict(tool.get("function"), f"{path}.function")
    declaration: dict[str, Any] = {"name": as_str(function.get("name"), f"{path}.function.name")}
    if isinstance(function.get("description"), str):
        declaration["description"] = function["description"]
    if function.get("parameters") is not None:
        declaration["parametersJsonSchema"] = as_dict(function["parameters"], f"{path}.function.parameters")
    return declaration


def _calling_config(choice: Any) -> dict[str, Any]:
    if choice == "auto":
        return {"mode": "AUTO"}
    if choice == "none":
        return {"mode": "NONE"}
    if choice == "required":
        return {"mode": "ANY"}
    if isinstance(choice, dict) and choice.get("type") == "function":
        function = as_dict(choice.get("function"), "tool_choice.function")
        return {"mode": "ANY", "allowedFunctionNames": [as_str(function.get("name"), "tool_choice.function.name")]}
    if isinstance(choice, dict):
        raise CapabilityError("tool_choice", f"tool_choice type '{choice.get('type')}' has no Gemini equivalent",
                              "tool_choice.type")
    raise RequestShapeError("tool_choice must be auto, none, required or a function", "tool_choice")
