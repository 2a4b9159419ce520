"""Request body (OpenAI or Anthropic shape) -> Features: everything routing needs, read in one pass.

The classifier, the session detector and the engine all read the same ``Features``, so a request body is
walked exactly once. The rules for what counts are written out in docs/smart-routing.md; in short:

* Counted characters (``total_chars``) are Unicode code points of every text the model reads as the
  conversation: the system prompt (Anthropic ``system``, OpenAI ``system``/``developer`` messages), the text
  of every message of every role, tool results, and the string values inside tool-call arguments (keys,
  numbers and JSON punctuation do not count, so ``{"a": "xy"}`` is 2 characters in both shapes). Tool
  definitions, response schemas, attachment data, thinking blocks, names and ids do not count.
* Code and diagnostics are looked for in the same texts except the system prompt, which is usually a
  static template with format examples and would otherwise mark every request of a client as code.
* The latest user message is the last ``user`` message that is not made only of tool results (Anthropic
  sends tool results as user turns; OpenAI sends them as ``tool`` messages), and its text is its string
  content or its text parts joined by newlines.
* Conversation depth counts turns: messages other than system prompts, where consecutive messages from the
  same side (assistant, or user-side: user and tool) count once. Parallel tool results are one turn in
  both shapes.

Both shapes are read by the same walker, so equivalent content gives equal features. Any JSON is accepted:
values of an unexpected type are ignored, never raised on; validating the schema is the caller's job.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from routing.core import body_fields
from routing.core.body_fields import ToolSpec  # re-exported: a part of Features
from routing.core.code_evidence import code_evidence

Shape = Literal["openai", "anthropic"]

CHARS_PER_TOKEN = 4
# A rough input-token charge per image (a 1-megapixel image costs ~765-1,600 tokens across providers).
IMAGE_TOKEN_ALLOWANCE = 1_000

_SYSTEM_ROLES = frozenset({"system", "developer"})
_ATTACHMENT_KINDS = {
    "image_url": "image",  # OpenAI
    "input_image": "image",
    "image": "image",  # Anthropic
    "input_audio": "audio",  # OpenAI
    "file": "file",  # OpenAI
    "input_file": "file",
    "document": "file",  # Anthropic
}
_TOOL_CALL_BLOCKS = frozenset({"tool_use", "server_tool_use"})


@dataclasses.dataclass(frozen=True)
class Features:
    """What the gateway knows about one request after reading its body once."""

    shape: str
    model: str
    total_chars: int
    latest_user_text: str
    message_count: int  # conversation depth in turns (see the module docstring)
    raw_message_count: int  # entries in ``messages``, as sent
    tools: tuple[ToolSpec, ...]
    tool_choice: str | None  # "auto", "none", "required", "tool" (one named tool), or None when absent
    forced_tool: str | None  # the tool's name when tool_choice is "tool"
    structured_output: str  # "json_schema", "json_object" or "" when none was requested
    output_schema: Mapping[str, Any] | None
    output_schema_strict: bool
    attachments: tuple[str, ...]  # the kind of each attachment ("image", "audio", "file") in body order
    modalities: frozenset[str]
    code_evidence: str  # what showed code or diagnostics, "" when nothing did
    reasoning: str  # how reasoning was requested, e.g. "reasoning_effort=high"; "" when it was not
    max_output_tokens: int | None
    stream: bool
    estimated_input_tokens: int
    system_text: str  # the system prompt before the first user turn (session identity)
    opening_turns: tuple[tuple[str, str], ...]  # (role, text) up to and including the first user turn
    metadata_user_id: str | None
    session_id: str | None
    prompt_cache_key: str | None
    user: str | None

    @functools.cached_property
    def folded_user_text(self) -> str:
        """The latest user text case-folded, once: the tier and the category classifiers both match on it."""
        return self.latest_user_text.casefold()

    @property
    def tool_count(self) -> int:
        return len(self.tools)

    @property
    def tool_names(self) -> tuple[str, ...]:
        return tuple(tool.name for tool in self.tools)

    @property
    def has_code(self) -> bool:
        return bool(self.code_evidence)

    @property
    def reasoning_requested(self) -> bool:
        return bool(self.reasoning)


def extract_features(body: Mapping[str, Any], shape: Shape) -> Features:
    """Features of ``body``; linear in its size and never raising, whatever JSON a client sent."""
    if type(body) is not dict and not isinstance(body, Mapping):  # the ABC check costs ~0.4 us; skip it for dicts
        body = {}
    walk = _MessageWalk()
    system = body.get("system")  # Anthropic's system prompt (read in either shape, like every field)
    if system is not None:
        walk.add_system(system)
    messages = body.get("messages")
    if isinstance(messages, list):
        for message in messages:
            if isinstance(message, dict):
                walk.add_message(message)
    scanned = "\n".join(walk.scanned_texts)  # starts with a newline, like every other line (see _MessageWalk)
    total_chars = walk.system_chars + len(scanned) - (len(walk.scanned_texts) - 1)  # less the joining newlines
    attachments = tuple(walk.attachments)
    fields = _DEFAULT_FIELDS.copy()
    fields["shape"] = shape
    fields["model"] = body_fields.text_field(body.get("model")) or ""
    fields["total_chars"] = total_chars
    fields["latest_user_text"] = "\n".join(walk.latest_user_texts)
    fields["message_count"] = walk.turns
    fields["raw_message_count"] = len(messages) if isinstance(messages, list) else 0
    fields["attachments"] = attachments
    fields["modalities"] = _modalities(attachments, total_chars)
    fields["code_evidence"] = code_evidence(scanned)
    fields["stream"] = body.get("stream") is True
    fields["estimated_input_tokens"] = (
        -(-total_chars // CHARS_PER_TOKEN) + attachments.count("image") * IMAGE_TOKEN_ALLOWANCE
    )
    fields["system_text"] = "\n\n".join(walk.system_texts)
    fields["opening_turns"] = tuple(walk.opening_turns)
    if not _OPTIONAL_KEYS.isdisjoint(body):  # one pass over the body's few keys instead of 16 lookups
        _read_optional_fields(body, fields)
    return _features_from_fields(fields)


def _features_from_fields(fields: dict[str, Any]) -> Features:
    """A Features holding ``fields``, built without the per-field cost of a frozen dataclass's __init__.

    Why: a frozen dataclass assigns each of its 25 fields through ``object.__setattr__``, which measured
    ~8 us on the 2-core box, 40% of the 20 us budget of a whole typical request; installing the finished
    field dict is one call. The result equals ``Features(**fields)`` (a test checks that every field is
    given), and stays frozen: assigning to it still raises.
    """
    features = object.__new__(Features)
    object.__setattr__(features, "__dict__", fields)
    return features


# Every field of Features: those read from optional body keys hold their value for a body without the keys,
# and extract_features sets the others. Copying it and setting 13 fields costs half of building the 25-key dict.
_DEFAULT_FIELDS: dict[str, Any] = dict.fromkeys(field.name for field in dataclasses.fields(Features))
_DEFAULT_FIELDS.update(
    tools=(),
    tool_choice=None,
    forced_tool=None,
    structured_output="",
    output_schema=None,
    output_schema_strict=False,
    reasoning="",
    max_output_tokens=None,
    metadata_user_id=None,
    session_id=None,
    prompt_cache_key=None,
    user=None,
)
# The body keys that _read_optional_fields reads.
_OPTIONAL_KEYS = frozenset({
    "tools", "functions", "tool_choice", "function_call", "response_format", "output_format", "output_config",
    "reasoning_effort", "reasoning", "thinking", "max_completion_tokens", "max_tokens", "metadata", "session_id",
    "prompt_cache_key", "user",
})  # fmt: skip


def _read_optional_fields(body: Mapping[str, Any], fields: dict[str, Any]) -> None:
    """Set in ``fields`` what the body's optional keys say; each reader runs only when its keys are present."""
    if "tools" in body or "functions" in body:
        fields["tools"] = body_fields.tools(body.get("tools")) + body_fields.tools(body.get("functions"))
    if "tool_choice" in body or "function_call" in body:
        fields["tool_choice"], fields["forced_tool"] = body_fields.tool_choice(body)
    if "response_format" in body or "output_format" in body or "output_config" in body:
        structured = body_fields.structured_output(body)
        fields["structured_output"], fields["output_schema"], fields["output_schema_strict"] = structured
    if "reasoning_effort" in body or "reasoning" in body or "thinking" in body:
        fields["reasoning"] = body_fields.reasoning(body)
    fields["max_output_tokens"] = body_fields.max_output_tokens(body)
    metadata = body.get("metadata")
    if isinstance(metadata, dict):
        fields["metadata_user_id"] = body_fields.text_field(metadata.get("user_id"))
    for key in ("session_id", "prompt_cache_key", "user"):
        if key in body:
            fields[key] = body_fields.text_field(body[key])


_TEXT_ONLY = frozenset({"text"})
_NO_MODALITY: frozenset[str] = frozenset()


def _modalities(attachments: tuple[str, ...], total_chars: int) -> frozenset[str]:
    if not attachments:  # the common case, answered without building a set
        return _TEXT_ONLY if total_chars else _NO_MODALITY
    return frozenset(attachments + ("text",)) if total_chars else frozenset(attachments)


_NO_TEXTS: tuple[str, ...] = ()  # the tool results and attachments of a message whose content is one string


class _MessageWalk:
    """Accumulates texts, attachments and turns while the messages are visited once, in order."""

    __slots__ = (
        "system_chars",
        "scanned_texts",
        "latest_user_texts",
        "attachments",
        "turns",
        "_last_side",
        "system_texts",
        "opening_turns",
        "_opening_done",
    )

    def __init__(self) -> None:
        self.system_chars = 0
        # Texts looked at for code. The empty first one makes their join start with a newline, so that every
        # line of the join follows one; their counted characters are measured once, on the join.
        self.scanned_texts: list[str] = [""]
        self.latest_user_texts: list[str] = []
        self.attachments: list[str] = []
        self.turns = 0
        self._last_side = ""
        self.system_texts: list[str] = []
        self.opening_turns: list[tuple[str, str]] = []
        self._opening_done = False

    def add_system(self, system: object) -> None:
        texts: list[str] = []
        if isinstance(system, str):
            texts.append(system)
        elif isinstance(system, list):
            for block in system:
                if isinstance(block, dict) and isinstance(block.get("text"), str):
                    texts.append(block["text"])
                elif isinstance(block, str):
                    texts.append(block)
        self.system_chars += sum(map(len, texts))
        self.system_texts.extend(texts)

    def add_message(self, message: dict[str, Any]) -> None:
        role = message.get("role")
        if type(role) is not str:
            role = ""
        content = message.get("content")
        texts: list[str]  # the message's own text
        extra: Sequence[str]  # tool results and tool-call argument strings
        kinds: Sequence[str]  # the kinds of its attachments
        if type(content) is str and "tool_calls" not in message and "function_call" not in message:
            texts = [content]  # the common case, without the walk over parts
            extra = kinds = _NO_TEXTS
            has_tool_result = False
        else:
            texts, extra, kinds, has_tool_result = self._read_parts(message, content)
        if role in _SYSTEM_ROLES:
            self.system_chars += sum(map(len, texts)) + sum(map(len, extra))
            if not self._opening_done:
                self.system_texts += texts
            return
        self.scanned_texts += texts
        if extra:
            self.scanned_texts += extra
        side = "assistant" if role == "assistant" else "user"
        if side != self._last_side:
            self.turns += 1
            self._last_side = side
        if role == "user" and (texts or not has_tool_result):
            self.latest_user_texts = texts
        if not self._opening_done:
            # An attachment is marked, so that an opening made only of an image still identifies a session;
            # without one, the comprehension's ~0.1 us is skipped.
            opening = "\n".join([*texts, *[f"[{kind}]" for kind in kinds]]) if kinds else "\n".join(texts)
            self.opening_turns.append((role, opening))
            self._opening_done = role == "user"

    def _read_parts(self, message: dict[str, Any], content: object) -> tuple[list[str], list[str], list[str], bool]:
        """(texts, extra, attachment kinds, holds a tool result) of a message that is more than one string."""
        kinds_before = len(self.attachments)
        texts: list[str] = []
        extra: list[str] = []
        has_tool_result = self._add_content(content, texts, extra)
        if "tool_calls" in message or "function_call" in message:
            _add_tool_calls(message, extra)
        return texts, extra, self.attachments[kinds_before:], has_tool_result

    def _add_content(self, content: object, texts: list[str], extra: list[str], *, nested: bool = False) -> bool:
        """Sort the parts of one message's content; True when it holds a tool result.

        A tool result's own content is sorted once more (``nested``), and a tool result inside it is
        ignored: no API nests them, and refusing to recurse keeps the walk's depth fixed.
        """
        if isinstance(content, str):
            texts.append(content)
            return False
        if not isinstance(content, list):
            return False
        has_tool_result = False
        for part in content:
            if isinstance(part, str):
                texts.append(part)
                continue
            if not isinstance(part, dict):
                continue
            kind = part.get("type")
            if kind == "text":
                text = part.get("text")
                if isinstance(text, str):
                    texts.append(text)
            elif kind == "tool_result" and not nested:
                has_tool_result = True
                self._add_content(part.get("content"), extra, extra, nested=True)
            elif kind in _TOOL_CALL_BLOCKS:
                _add_leaves(part.get("input"), extra)
            elif isinstance(kind, str) and kind in _ATTACHMENT_KINDS:
                self.attachments.append(_ATTACHMENT_KINDS[kind])
        return has_tool_result


def _add_tool_calls(message: dict[str, Any], out: list[str]) -> None:
    """The argument strings of an OpenAI assistant message's ``tool_calls`` (and legacy ``function_call``)."""
    tool_calls = message.get("tool_calls")
    if isinstance(tool_calls, list):
        for call in tool_calls:
            if not isinstance(call, dict):
                continue
            function = call.get("function")
            if isinstance(function, dict):
                _add_arguments(function.get("arguments"), out)
            custom = call.get("custom")
            if isinstance(custom, dict) and isinstance(custom.get("input"), str):
                out.append(custom["input"])
    function_call = message.get("function_call")
    if isinstance(function_call, dict):
        _add_arguments(function_call.get("arguments"), out)


def _add_arguments(arguments: object, out: list[str]) -> None:
    """The string values inside OpenAI tool-call arguments (a JSON text), like Anthropic's ``input``."""
    if not isinstance(arguments, str):
        _add_leaves(arguments, out)
        return
    try:
        parsed = json.loads(arguments)
    except (ValueError, RecursionError):
        out.append(arguments)  # not JSON: the model wrote free text, which counts as it is
        return
    _add_leaves(parsed, out)


def _add_leaves(value: object, out: list[str]) -> None:
    """Every string value nested in ``value``; iterative, so deep nesting cannot overflow the stack."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


