"""Response ids in the client's conventional spelling (``chatcmpl-...`` for OpenAI, ``msg_...`` for
Anthropic), derived from the upstream id so that a client's id can be traced to the provider's."""

from __future__ import annotations

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
