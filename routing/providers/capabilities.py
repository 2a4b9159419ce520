"""What a request needs from a model, and the refusal when the chosen model cannot do it.

Scanned on the CLIENT's body (either shape), so the refusal names the client's own JSON path. The scan
reads the body without copying it; it runs on every attempt, pass-through included, because an image
must never reach a text-only model, whatever the wire format.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from routing.core.table import ModelSpec
from routing.providers.errors import CapabilityError, Inbound

_WHAT = {
    "image": "image input",
    "audio": "audio input",
    "file": "file or document input",
    "tools": "tool calling",
    "json_schema": "structured output with a JSON schema",
    "reasoning": "reasoning (thinking)",
}

_OPENAI_PART_NEEDS = {"image_url": "image", "input_audio": "audio", "file": "file"}
_ANTHROPIC_BLOCK_NEEDS = {"image": "image", "document": "file"}


def required_capabilities(inbound: Inbound, body: Mapping[str, Any]) -> dict[str, str]:
    """Each capability the request needs, mapped to the JSON path of its first use (``text`` is implied)."""
    if inbound == "anthropic":
        return _anthropic_needs(body)
    return _openai_needs(body)


def check_capabilities(model: ModelSpec, needs: Mapping[str, str]) -> None:
    """Raise CapabilityError for the first need ``model`` does not list; return quietly otherwise."""
    for capability, path in needs.items():
        if capability not in model.capabilities:
            what = _WHAT.get(capability, capability)
            raise CapabilityError(
                capability,
                f"model '{model.name}' does not support {what} (capability '{capability}', used at {path})",
                path,
            )


def _need(needs: dict[str, str], capability: str, path: str) -> None:
    needs.setdefault(capability, path)


def _need_of(table: dict[str, str], kind: Any) -> str | None:
    return table.get(kind) if isinstance(kind, str) else None


def _items(value: Any) -> Iterable[tuple[int, Any]]:
    return enumerate(value) if isinstance(value, list) else ()


# The top-level fields that need a capability: a body with none of them is done after its messages.
_OPENAI_OPTION_FIELDS = frozenset({"tools", "functions", "response_format", "reasoning_effort", "modalities"})


def _openai_needs(body: Mapping[str, Any]) -> dict[str, str]:
    needs: dict[str, str] = {}
    for i, message in _items(body.get("messages")):
        if not isinstance(message, dict):
            continue
        content = message.get("content")
        if isinstance(content, list):  # a string (most messages) holds text only
            for j, part in enumerate(content):
                if isinstance(part, dict):
                    capability = _need_of(_OPENAI_PART_NEEDS, part.get("type"))
                    if capability:
                        _need(needs, capability, f"messages[{i}].content[{j}]")
        if message.get("audio"):
            _need(needs, "audio", f"messages[{i}].audio")
    if _OPENAI_OPTION_FIELDS.isdisjoint(body):
        return needs
    if body.get("tools"):
        _need(needs, "tools", "tools")
    elif body.get("functions"):
        _need(needs, "tools", "functions")
    response_format = body.get("response_format")
    if isinstance(response_format, dict) and response_format.get("type") == "json_schema":
        _need(needs, "json_schema", "response_format")
    effort = body.get("reasoning_effort")
    if effort is not None and effort != "none":
        _need(needs, "reasoning", "reasoning_effort")
    modalities = body.get("modalities")
    if isinstance(modalities, list) and "audio" in modalities:
        _need(needs, "audio", "modalities")
    return needs


def _anthropic_needs(body: Mapping[str, Any]) -> dict[str, str]:
    needs: dict[str, str] = {}
    for i, message in _items(body.get("messages")):
        if not isinstance(message, dict):
            continue
        for j, block in _items(message.get("content")):
            if not isinstance(block, dict):
                continue
            block_type = block.get("type")
            capability = _need_of(_ANTHROPIC_BLOCK_NEEDS, block_type)
            if capability:
                _need(needs, capability, f"messages[{i}].content[{j}]")
            elif block_type == "tool_result":
                for k, inner in _items(block.get("content")):
                    inner_kind = inner.get("type") if isinstance(inner, dict) else None
                    inner_need = _need_of(_ANTHROPIC_BLOCK_NEEDS, inner_kind)
                    if inner_need:
                        _need(needs, inner_need, f"messages[{i}].content[{j}].content[{k}]")
    if body.get("tools"):
        _need(needs, "tools", "tools")
    if body.get("output_format"):
        _need(needs, "json_schema", "output_format")
    output_config = body.get("output_config")
    if isinstance(output_config, dict):
        if output_config.get("format"):
            _need(needs, "json_schema", "output_config.format")
        if output_config.get("effort"):
            _need(needs, "reasoning", "output_config.effort")
    thinking = body.get("thinking")
    if isinstance(thinking, dict) and thinking.get("type") not in (None, "disabled"):
        _need(needs, "reasoning", "thinking")
    return needs
