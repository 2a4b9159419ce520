"""Whether an attempt's request goes to Claude with its thinking turned off (thinking_turns), for the gateway's
``X-GoModel-Thinking: off`` header and the attempt's ``thinking`` in the audit event."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from routing.providers.bedrock.request import is_anthropic_model
from routing.providers.common.thinking_turns import thinking_turned_off
from routing.providers.errors import Inbound

_CLAUDE_KINDS = frozenset({"anthropic", "vertex_anthropic"})


def thinking_off_for(*, kind: str, upstream: str, body: Mapping[str, Any], inbound: Inbound) -> bool:
    """The chat body of an OpenAI-format client asks for thinking, but the target (Claude on Anthropic, Vertex AI or
    Bedrock) is sent it off because the final tool turn came back without its signed thinking."""
    if inbound != "openai" or "reasoning_effort" not in body:
        return False
    if kind not in _CLAUDE_KINDS and not (kind == "bedrock" and is_anthropic_model(upstream)):
        return False
    return thinking_turned_off(body)
