"""Prompt: what the simulator needs to know about a request, whatever wire format it came in.

Each wire module turns its provider's request body into a Prompt; the answer is composed from the Prompt
alone, so the four formats answer alike for the same conversation.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# Tokens billed for one image, document, audio clip or file part (a 1024x1024 image at high detail).
ATTACHMENT_TOKENS = 765
# Tokens a provider adds per message for role and separators.
MESSAGE_OVERHEAD_TOKENS = 3


def estimate_tokens(chars: int) -> int:
    """Tokens for ``chars`` characters of text: about four characters a token, rounded up."""
    return (chars + 3) // 4


@dataclass(frozen=True, slots=True)
class ToolSpec:
    name: str
    schema: Mapping[str, Any]  # the JSON schema of the tool's arguments


@dataclass(frozen=True, slots=True)
class Prompt:
    """The parts of a request that shape the answer and its usage numbers."""

    model: str
    last_user_text: str = ""
    input_chars: int = 0  # every character of system prompt, messages and tool definitions
    message_count: int = 0
    attachments: int = 0  # images, documents, audio and file parts
    tools: tuple[ToolSpec, ...] = ()
    tool_choice: str = "auto"  # auto | none | required
    forced_tool: str | None = None
    answers_tool_result: bool = False  # the last turn hands back a tool result
    output_schema: Mapping[str, Any] | None = None  # JSON schema the answer text must satisfy
    json_mode: bool = False  # a JSON object is wanted, without a schema
    max_tokens: int | None = None
    stop_sequences: tuple[str, ...] = ()
    stream: bool = False
    include_usage: bool = False  # OpenAI stream_options.include_usage
    choices: int = 1  # OpenAI n
    reasoning_tokens: int = 0  # hidden reasoning to report (OpenAI reasoning_effort)
    reasoning_visible: bool = False  # thinking text is returned (Anthropic thinking, Gemini thoughts)
    prefix_key: str | None = None  # fingerprint of everything before the last message
    prefix_chars: int = 0
    prefix_attachments: int = 0
    prefix_messages: int = 0
    explicit_cache: bool = False  # Anthropic cache_control markers present
    echo: Mapping[str, Any] | None = None  # request settings a wire repeats in its answer (OpenAI Responses)

    @property
    def input_tokens(self) -> int:
        return (
            estimate_tokens(self.input_chars)
            + self.attachments * ATTACHMENT_TOKENS
            + self.message_count * MESSAGE_OVERHEAD_TOKENS
        )

    @property
    def prefix_tokens(self) -> int:
        return (
            estimate_tokens(self.prefix_chars)
            + self.prefix_attachments * ATTACHMENT_TOKENS
            + self.prefix_messages * MESSAGE_OVERHEAD_TOKENS
        )

    @property
    def wants_tool_call(self) -> bool:
        """True when the answer should call a tool: tools declared and allowed.

        Under ``auto``, a turn that hands back a tool result is answered in text, so an agent loop
        driven by the simulator ends instead of calling the tool forever.
        """
        if not self.tools or self.tool_choice == "none":
            return False
        return not (self.tool_choice == "auto" and self.forced_tool is None and self.answers_tool_result)

    def chosen_tool(self) -> ToolSpec | None:
        """The forced tool when one is named and declared, else the first declared tool."""
        if not self.tools:
            return None
        if self.forced_tool is not None:
            for tool in self.tools:
                if tool.name == self.forced_tool:
                    return tool
        return self.tools[0]


class TextTally:
    """Counts characters and attachments while a wire module walks a request's content."""

    __slots__ = ("chars", "attachments")

    def __init__(self) -> None:
        self.chars = 0
        self.attachments = 0

    def text(self, value: Any) -> str:
        """Count ``value`` when it is a string and return it ("" otherwise)."""
        if isinstance(value, str):
            self.chars += len(value)
            return value
        return ""

    def json(self, value: Any) -> None:
        """Count a structured value (tool arguments, tool definitions) by its JSON length."""
        if value is not None:
            self.chars += len(json.dumps(value, separators=(",", ":"), ensure_ascii=False))

    def attachment(self) -> None:
        self.attachments += 1

    def parts(self, content: Any, *, text_kinds: tuple[str, ...], attachment_kinds: tuple[str, ...],
              refusals: bool = True) -> str:
        """The text of a content that is a string or a list of typed parts (joined by newlines), counting its
        text parts, its attachments and, with ``refusals``, the text of ``refusal`` parts (not returned)."""
        if isinstance(content, str):
            return self.text(content)
        if not isinstance(content, list):
            return ""
        texts = []
        for part in content:
            if not isinstance(part, Mapping):
                continue
            kind = part.get("type")
            if kind in text_kinds:
                texts.append(self.text(part.get("text")))
            elif kind in attachment_kinds:
                self.attachment()
            elif refusals and kind == "refusal":
                self.text(part.get("refusal"))
        return "\n".join(texts)


def fingerprint(*parts: Any) -> str:
    """A short stable hash of JSON-able parts (used to recognise a repeated prompt prefix)."""
    text = json.dumps(parts, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.blake2b(text.encode("utf-8"), digest_size=12).hexdigest()


def positive_int(value: Any) -> int | None:
    """``value`` when it is a positive integer (not a bool), else None."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return None


def string_list(value: Any) -> tuple[str, ...]:
    """Stop sequences given as one string or a list of strings."""
    if isinstance(value, str):
        return (value,) if value else ()
    if isinstance(value, list):
        return tuple(item for item in value if isinstance(item, str) and item)
    return ()
