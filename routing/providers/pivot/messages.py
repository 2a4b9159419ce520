"""The walk over an OpenAI chat body's messages that every translator to another format starts from.

Each message comes with its JSON path and its role, ``developer`` read as ``system`` (the newer name OpenAI
gives the same instructions); what no format can carry is refused here, once, in the same words for all.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, NamedTuple

from routing.providers.common.shape import as_dict
from routing.providers.errors import RequestShapeError

_ROLES = ("system", "user", "assistant", "tool")


class ChatMessage(NamedTuple):
    role: str  # "system", "user", "assistant" or "tool"
    message: dict[str, Any]
    path: str  # "messages[i]", for errors naming the client's field


def chat_messages(messages: list[Any]) -> Iterator[ChatMessage]:
    """The messages in order; RequestShapeError, when the walk reaches it, for a message that is not an object,
    a legacy ``function`` message or an unknown role."""
    for i, message in enumerate(messages):
        path = f"messages[{i}]"
        message = as_dict(message, path)
        role = message.get("role")
        if role == "developer":
            role = "system"
        elif role == "function":
            raise RequestShapeError("legacy function messages are not supported: use tools", f"{path}.role")
        elif role not in _ROLES:
            raise RequestShapeError(f"unknown role '{role}'", f"{path}.role")
        yield ChatMessage(role, message, path)


def merge_turn(turns: list[dict[str, Any]], role: str, blocks: list[dict[str, Any]], *, key: str = "content") -> None:
    """Add ``blocks`` as a turn of ``role``, to the previous turn when it has that role: Anthropic, Gemini and
    Converse want user and model turns to alternate, and the results of parallel tool calls to share one turn.
    No turn for no blocks."""
    if not blocks:
        return
    if turns and turns[-1]["role"] == role:
        turns[-1][key].extend(blocks)
    else:
        turns.append({"role": role, key: blocks})
