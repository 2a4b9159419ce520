"""The conversation rules Anthropic's Messages API enforces, with its own wording, and the thinking it signs.

Checked on every request (``check_conversation``), each refusal a 400 ``invalid_request_error``:

- consecutive turns of one role are combined into one turn, as Anthropic combines them;
- a ``tool_use`` id matches ``^[a-zA-Z0-9_-]+$`` and is unique in the conversation;
- every ``tool_use`` is answered by a ``tool_result`` in the very next (user) turn, and every ``tool_result``
  answers a ``tool_use`` of the turn right before it;
- every ``thinking`` block carries a signature this simulator issued for exactly its text, every
  ``redacted_thinking`` block data it issued;
- with thinking enabled, a final assistant turn that holds ``tool_use`` starts with a ``thinking`` or
  ``redacted_thinking`` block.

Signatures are an HMAC of the thinking text under a key fixed in the code, so every simulator process accepts
what any other issued, and a block whose text was changed is refused as Anthropic refuses it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from routing.simulator.wire.base import RequestError
from routing.simulator.wire.signing import seal, sealed

# Anthropic's documented test string: a request holding it is answered with a redacted_thinking block.
REDACTED_TRIGGER = (
    "ANTHROPIC_MAGIC_STRING_TRIGGER_REDACTED_THINKING_46C9A13E193C177646C7398A98432ECCCE4C1253D5E2D82641AC0E52CC2876CB"
)
_KEY = b"gomodel-simulator-thinking-v1"
_SIGNED = b"SIMT"
_REDACTED = b"SIMR"
_ID_PATTERN = re.compile(r"^[a-zA-Z0-9_-]+$")
_THINKING_FIRST = (
    "messages.{index}.content.0.type: Expected `thinking` or `redacted_thinking`, but found `{found}`. When "
    "`thinking` is enabled, a final `assistant` message must start with a thinking block (preceeding the "
    "lastmost set of `tool_use` and `tool_result` blocks). We recommend you include thinking blocks from previous "
    "turns. To avoid this requirement, disable `thinking`. Please consult our documentation at "
    "https://docs.claude.com/en/docs/build-with-claude/extended-thinking"
)


def sign_thinking(token: str, text: str) -> str:
    """The signature of a thinking block with ``text``, issued for the request ``token`` (24 hex characters)."""
    return seal(_KEY, _SIGNED, token, text.encode("utf-8"))


def redacted_data(token: str) -> str:
    """The opaque data of a redacted_thinking block issued for the request ``token``."""
    return seal(_KEY, _REDACTED, token)


def signature_valid(signature: Any, text: Any) -> bool:
    """The signature was issued by ``sign_thinking`` for exactly ``text``."""
    return isinstance(text, str) and sealed(_KEY, _SIGNED, signature, text.encode("utf-8"))


def redacted_valid(data: Any) -> bool:
    return sealed(_KEY, _REDACTED, data)


@dataclass
class _Turn:
    role: str
    blocks: list[tuple[int, int, Mapping[str, Any]]] = field(default_factory=list)  # (message, block, block)


def check_conversation(messages: list[Any], *, thinking_on: bool) -> None:
    """Raise RequestError for the first rule of Anthropic's the conversation breaks (the module docstring)."""
    turns = _turns(messages)
    seen_ids: set[str] = set()
    for position, turn in enumerate(turns):
        if turn.role == "assistant":
            _check_assistant(turn, seen_ids)
            following = turns[position + 1] if position + 1 < len(turns) else None
            _check_answered(turn, following)
        else:
            previous = turns[position - 1] if position > 0 else None
            _check_results(turn, previous)
    if thinking_on:
        _check_thinking_first(turns)


def _turns(messages: list[Any]) -> list[_Turn]:
    turns: list[_Turn] = []
    for index, message in enumerate(messages):
        if not isinstance(message, Mapping):
            continue
        role = str(message.get("role"))
        content = message.get("content")
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
        if not turns or turns[-1].role != role:  # consecutive turns of one role are one turn
            turns.append(_Turn(role))
        turns[-1].blocks.extend((index, number, block) for number, block in enumerate(blocks)
                                if isinstance(block, Mapping))
    return turns


def _check_assistant(turn: _Turn, seen_ids: set[str]) -> None:
    for index, number, block in turn.blocks:
        kind = block.get("type")
        where = f"messages.{index}.content.{number}"
        if kind == "tool_use":
            tool_id = block.get("id")
            if not isinstance(tool_id, str) or not _ID_PATTERN.match(tool_id):
                raise RequestError(f"{where}.tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'",
                                   f"{where}.id")
            if tool_id in seen_ids:
                raise RequestError(f"{where}: `tool_use` ids must be unique", f"{where}.id")
            seen_ids.add(tool_id)
        elif kind == "thinking" and not signature_valid(block.get("signature"), block.get("thinking")):
            raise RequestError(f"{where}: Invalid `signature` in `thinking` block", f"{where}.signature")
        elif kind == "redacted_thinking" and not redacted_valid(block.get("data")):
            raise RequestError(f"{where}: Invalid `data` in `redacted_thinking` block", f"{where}.data")


def _check_answered(turn: _Turn, following: _Turn | None) -> None:
    """Every tool_use of an assistant turn is answered in the next turn (a final turn needs no answer yet)."""
    if following is None:
        return
    asked = [(index, str(block.get("id"))) for index, _, block in turn.blocks if block.get("type") == "tool_use"]
    answered = {block.get("tool_use_id") for _, _, block in following.blocks if block.get("type") == "tool_result"}
    missing = [tool_id for _, tool_id in asked if tool_id not in answered]
    if missing:
        raise RequestError(
            f"messages.{asked[0][0]}: `tool_use` ids were found without `tool_result` blocks immediately after: "
            f"{', '.join(missing)}. Each `tool_use` block must have a corresponding `tool_result` block in the next "
            "message.", f"messages.{asked[0][0]}")


def _check_results(turn: _Turn, previous: _Turn | None) -> None:
    asked = set()
    if previous is not None:
        asked = {block.get("id") for _, _, block in previous.blocks if block.get("type") == "tool_use"}
    for index, number, block in turn.blocks:
        if block.get("type") == "tool_result" and block.get("tool_use_id") not in asked:
            raise RequestError(
                f"messages.{index}.content.{number}: unexpected `tool_use_id` found in `tool_result` blocks: "
                f"{block.get('tool_use_id')}. Each `tool_result` block must have a corresponding `tool_use` block "
                "in the previous message.", f"messages.{index}.content.{number}.tool_use_id")


def _check_thinking_first(turns: list[_Turn]) -> None:
    final = next((turn for turn in reversed(turns) if turn.role == "assistant"), None)
    if final is None or not final.blocks or not any(b.get("type") == "tool_use" for _, _, b in final.blocks):
        return
    index, _, first = final.blocks[0]
    if first.get("type") not in ("thinking", "redacted_thinking"):
        raise RequestError(_THINKING_FIRST.format(index=index, found=first.get("type")), f"messages.{index}.content")
