"""Anthropic's ``POST /v1/messages/count_tokens``: a deterministic count, with the chat checks and faults.

The count is the characters of ``system``, ``messages`` and ``tools`` (their JSON) at four a token, plus 85 a
request, so the same body always gets the same number and a longer one a larger number. ``max_tokens`` is
refused as the real endpoint refuses extra inputs, so a gateway that forwards the whole Messages body is
caught by the tests.
"""

from __future__ import annotations

import json
import math
from typing import Any

from routing.simulator.asgi_io import Connection
from routing.simulator.exchange import Exchange, refuse
from routing.simulator.routes import Route
from routing.simulator.state import SimulatorState
from routing.simulator.wire.base import INVALID_REQUEST, Problem
from routing.simulator.wire.embeddings import admission_problem, deliver_with_faults, serve_json_endpoint

BASE_TOKENS = 85  # a request's fixed overhead, as a system preamble would add
_ACCEPTED = frozenset({"model", "messages", "system", "tools", "tool_choice", "thinking", "mcp_servers"})


def counted_tokens(body: dict[str, Any]) -> int:
    chars = sum(len(json.dumps(body[name], ensure_ascii=False, separators=(",", ":")))
                for name in ("system", "messages", "tools") if name in body)
    return BASE_TOKENS + math.ceil(chars / 4)


async def serve_count_tokens(state: SimulatorState, conn: Connection, route: Route, headers: dict[str, str],
                             query_string: str) -> None:
    await serve_json_endpoint(state, conn, route, headers, query_string, endpoint="count_tokens", respond=_answer)


async def _answer(state: SimulatorState, exchange: Exchange, route: Route, body: Any, *, parsed: bool,
                  too_large: bool, headers: dict[str, str], query: dict[str, str]) -> None:
    problem = admission_problem(exchange, body, parsed=parsed, too_large=too_large, headers=headers, query=query)
    if problem is None:
        vertex = route.wire.name == "vertex_anthropic"  # Vertex AI's count also takes anthropic_version
        extra = sorted(set(body) - _ACCEPTED - ({"anthropic_version"} if vertex else set()))
        if extra:
            problem = Problem(INVALID_REQUEST, 400, message=f"{extra[0]}: Extra inputs are not permitted",
                              param=extra[0])
        elif not isinstance(body.get("messages"), list) or not body["messages"]:
            problem = Problem(INVALID_REQUEST, 400, message="messages: Field required", param="messages")
    if problem is not None:
        await refuse(exchange, problem)
        return
    tokens = counted_tokens(body)
    payload = json.dumps({"input_tokens": tokens}).encode()
    await deliver_with_faults(state, exchange, route, payload, input_chars=4 * tokens, tokens=tokens)
