"""Response ids in the client's conventional spelling (``chatcmpl-...`` for OpenAI, ``msg_...`` for Anthropic) and
tool call ids in Anthropic's (``toolu_...``), derived from the upstream id so that a client's id can be traced to
the provider's, and a tool call id mapped back to exactly the provider's."""

from __future__ import annotations

import base64
import binascii
import re
import uuid


def openai_response_id(upstream_id: object) -> str:
    if not isinstance(upstream_id, str) or not upstream_id:
        return "chatcmpl-" + uuid.uuid4().hex
    if upstream_id.startswith("chatcmpl"):
        return upstream_id
    return "chatcmpl-" + upstream_id.removeprefix("msg_")


def anthropic_message_id(upstream_id: object) -> str:
    if not isinstance(upstream_id, str) or not upstream_id:
        return "msg_" + uuid.uuid4().hex
    if upstream_id.startswith("msg_"):
        return upstream_id
    return "msg_" + upstream_id.removeprefix("chatcmpl-")


# ----------------------------------------------------------------------------------------------------------
# Tool call ids in the inbound protocol's shape
# ----------------------------------------------------------------------------------------------------------
#
# Anthropic's clients and frameworks recognise a tool call by its ``toolu_`` id, so a call an OpenAI-format
# upstream issued (``call_…``, and Gemini's calls, which arrive in the OpenAI form) changes its prefix on the way
# to an Anthropic client and back on the way upstream, without any state:
#
#     upstream ``call_R``  ->  Anthropic client ``toolu_R``  ->  (sent back)  ->  upstream ``call_R``
#
# An upstream id of any other shape (``chatcmpl-tool-…`` from vLLM, Mistral's nine letters, one with characters
# outside ``[A-Za-z0-9_-]``) travels whole as ``toolu_gm-<URL-safe base64 of it>``, decoded on the way back, so the
# provider gets back exactly the id it issued. ``R`` never starts with ``gm-`` in the plain form (such an id is
# encoded), so the two forms cannot be confused. An id the client made up or received from an Anthropic-kind
# provider (a ``toolu_`` id reaching an OpenAI-format target) is renamed the same way in every message of the
# conversation, so a tool result still answers its call.
#
# The other way round nothing is renamed: OpenAI's clients treat a call id as opaque, and Claude's ``toolu_`` id
# is what carries its signed thinking through an OpenAI-format client (thinking_ids), so an OpenAI client of an
# Anthropic-kind target gets Claude's own id and sends it back as it came.

OPENAI_TOOL_PREFIX = "call_"
ANTHROPIC_TOOL_PREFIX = "toolu_"
_ENCODED = "gm-"
_PLAIN = re.compile(r"[A-Za-z0-9_-]+")


def _client_tool_id(upstream_id: str, upstream_prefix: str, client_prefix: str) -> str:
    rest = upstream_id[len(upstream_prefix):] if upstream_id.startswith(upstream_prefix) else None
    if rest and _PLAIN.fullmatch(rest) and not rest.startswith(_ENCODED):
        return client_prefix + rest
    encoded = base64.urlsafe_b64encode(upstream_id.encode()).decode().rstrip("=")
    return client_prefix + _ENCODED + encoded


def _upstream_tool_id(client_id: str, client_prefix: str, upstream_prefix: str) -> str:
    if not client_id.startswith(client_prefix):
        return client_id  # not one the gateway renamed: sent as the client wrote it
    rest = client_id[len(client_prefix):]
    if rest.startswith(_ENCODED):
        decoded = _decoded(rest[len(_ENCODED):])
        if decoded is not None and _client_tool_id(decoded, upstream_prefix, client_prefix) == client_id:
            return decoded
    return upstream_prefix + rest if rest else client_id


def _decoded(encoded: str) -> str | None:
    try:
        return base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None


def anthropic_tool_id(openai_id: str) -> str:
    """The id an Anthropic client sees for a tool call an OpenAI-format upstream issued (``call_R`` -> ``toolu_R``)."""
    return _client_tool_id(openai_id, OPENAI_TOOL_PREFIX, ANTHROPIC_TOOL_PREFIX)


def openai_upstream_tool_id(anthropic_client_id: str) -> str:
    """The OpenAI-format id behind an id an Anthropic client sent back (the inverse of ``anthropic_tool_id``)."""
    return _upstream_tool_id(anthropic_client_id, ANTHROPIC_TOOL_PREFIX, OPENAI_TOOL_PREFIX)
