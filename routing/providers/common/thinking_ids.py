"""Tool call ids that carry Claude's thinking blocks through an OpenAI-format client and back.

With thinking on, Anthropic (and Claude on Vertex and Bedrock) refuses a tool loop whose assistant turn does not
open with the signed ``thinking`` (or ``redacted_thinking``) blocks it issued, unchanged. An OpenAI chat client
keeps nothing of a turn but its text and tool calls, and every client sends the tool call id back (in the
assistant turn and in the ``tool`` message answering it), so the blocks that came before a tool call travel in
its id, as Gemini's thought signatures do (gemini_ids)::

    <upstream tool id>_th_<payload>

``payload`` is URL-safe base64 (no padding) of the zlib-compressed JSON ``{"id": <upstream tool id>, "b":
[["thinking", text, signature] | ["redacted_thinking", data], ...]}``: the id stays inside Anthropic's and the
OpenAI SDKs' ``[a-zA-Z0-9_-]`` alphabet and is returned unchanged by them. The payload names the id it belongs
to, so an id is split only where its tail decodes to a payload for exactly its head; any other id (one the
upstream or the client made, one a client edited) is an id without thinking. On the Responses API the payload
alone is the reasoning item's ``encrypted_content`` (chat_to_responses).
"""

from __future__ import annotations

import base64
import binascii
import json
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

MARK = "_th_"
THINKING = "thinking"
REDACTED = "redacted_thinking"
# A payload inflating past this is not one the gateway wrote (its thinking would not fit a request body anyway);
# the cap keeps a crafted id from expanding into a large allocation.
MAX_PAYLOAD_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class ThinkingBlock:
    """One thinking block of a Claude turn: its text and signature, or a redacted block's opaque data."""

    kind: str  # THINKING or REDACTED
    text: str  # the thinking text, or the redacted block's data
    signature: str = ""

    def as_anthropic(self) -> dict[str, Any]:
        """The block in Anthropic's Messages format."""
        if self.kind == REDACTED:
            return {"type": REDACTED, "data": self.text}
        return {"type": THINKING, "thinking": self.text, "signature": self.signature}

    def as_bedrock(self) -> dict[str, Any]:
        """The block as a Bedrock Converse ``reasoningContent`` block."""
        if self.kind == REDACTED:
            return {"reasoningContent": {"redactedContent": self.text}}
        return {"reasoningContent": {"reasoningText": {"text": self.text, "signature": self.signature}}}


def block_from_anthropic(block: Any) -> ThinkingBlock | None:
    """A ``thinking`` or ``redacted_thinking`` block of an Anthropic message; None for any other block."""
    if not isinstance(block, dict):
        return None
    kind = block.get("type")
    if kind == THINKING and isinstance(block.get("thinking"), str):
        signature = block.get("signature")
        return ThinkingBlock(THINKING, block["thinking"], signature if isinstance(signature, str) else "")
    if kind == REDACTED and isinstance(block.get("data"), str):
        return ThinkingBlock(REDACTED, block["data"])
    return None


def encode_payload(call_id: str, blocks: Sequence[ThinkingBlock]) -> str:
    """The payload carrying ``blocks`` for the tool call ``call_id``."""
    entries = [[b.kind, b.text] if b.kind == REDACTED else [b.kind, b.text, b.signature] for b in blocks]
    raw = json.dumps({"id": call_id, "b": entries}, ensure_ascii=False, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(zlib.compress(raw, 9)).decode("ascii").rstrip("=")


def decode_payload(payload: str) -> tuple[str, tuple[ThinkingBlock, ...]] | None:
    """(the tool call id, its blocks) of a payload ``encode_payload`` wrote; None for anything else."""
    if not payload or not payload.isascii():
        return None
    try:
        compressed = base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))
        inflater = zlib.decompressobj()
        raw = inflater.decompress(compressed, MAX_PAYLOAD_BYTES)
        if inflater.unconsumed_tail or not inflater.eof:
            return None
        value = json.loads(raw)
    except (binascii.Error, ValueError, zlib.error, RecursionError):
        return None
    if not isinstance(value, dict) or not isinstance(value.get("id"), str) or not isinstance(value.get("b"), list):
        return None
    blocks = []
    for entry in value["b"]:
        block = _block_of(entry)
        if block is None:
            return None
        blocks.append(block)
    return value["id"], tuple(blocks)


def _block_of(entry: Any) -> ThinkingBlock | None:
    if not isinstance(entry, list) or not entry or not all(isinstance(part, str) for part in entry):
        return None
    if entry[0] == REDACTED and len(entry) == 2:
        return ThinkingBlock(REDACTED, entry[1])
    if entry[0] == THINKING and len(entry) == 3:
        return ThinkingBlock(THINKING, entry[1], entry[2])
    return None


def id_with_thinking(call_id: str, blocks: Iterable[ThinkingBlock]) -> str:
    """``call_id`` with ``blocks`` folded in; ``call_id`` itself when there are none."""
    carried = tuple(blocks)
    if not carried:
        return call_id
    return call_id + MARK + encode_payload(call_id, carried)


def split_id(tool_call_id: str) -> tuple[str, tuple[ThinkingBlock, ...]]:
    """(the upstream tool call id, the thinking blocks folded into it), ``(tool_call_id, ())`` for a plain id."""
    start = tool_call_id.find(MARK)
    while start > 0:
        decoded = decode_payload(tool_call_id[start + len(MARK):])
        if decoded is not None and decoded[0] == tool_call_id[:start]:
            return decoded
        start = tool_call_id.find(MARK, start + 1)
    return tool_call_id, ()


def base_id(tool_call_id: str) -> str:
    """The upstream tool call id, without the thinking an id may carry (what Anthropic and Bedrock are sent)."""
    if MARK not in tool_call_id:
        return tool_call_id
    return split_id(tool_call_id)[0]


def split_payload(tool_call_id: str) -> tuple[str, str]:
    """(the upstream tool call id, the payload folded into it or "") : the Responses API's ``call_id`` and the
    reasoning item's ``encrypted_content``."""
    call_id, blocks = split_id(tool_call_id)
    if not blocks:
        return tool_call_id, ""
    return call_id, tool_call_id[len(call_id) + len(MARK):]


def is_gateway_reasoning(item: Any) -> bool:
    """A Responses ``reasoning`` input item whose ``encrypted_content`` is a payload of this gateway (Claude's
    thinking), which no OpenAI upstream could read."""
    if not isinstance(item, dict) or item.get("type") != "reasoning":
        return False
    content = item.get("encrypted_content")
    return isinstance(content, str) and decode_payload(content) is not None
