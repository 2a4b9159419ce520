"""The call of one Responses API request: checked, its stored conversation in front of its input, and the
equivalent chat body as what routing reads, so tiers, sessions, contracts and capability checks see its tools,
JSON schema and images exactly as they would in a chat completion."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from routing.core.features import extract_features
from routing.core.table import KeySpec, RoutingTable
from routing.gateway.gateway_error import GatewayError
from routing.gateway.records import Call
from routing.gateway.stored_responses import conversation_before
from routing.providers.errors import TranslationError
from routing.providers.responses_calls import ResponsesCall
from routing.providers.responses_ids import new_response_id
from routing.providers.responses_request import parse_responses_request
from routing.providers.responses_to_chat import responses_to_chat


async def responses_call(body: dict[str, Any], *, request_id: str, key: KeySpec | None, table: RoutingTable,
                         headers: Mapping[str, str], started: float, started_unix: float) -> Call:
    """The engine's call for a Responses body; GatewayError (400 naming the field) for a bad one."""
    try:
        request = parse_responses_request(body)
    except TranslationError as exc:
        raise GatewayError(400, exc.message, param=exc.param, code=exc.code, error_class="permanent") from None
    key_scope = key.id if key is not None else "open"
    conversation = [*await conversation_before(request, key_scope=key_scope), *request.items]
    chat = responses_to_chat(request, conversation)
    if not any(message["role"] != "system" for message in chat["messages"]):
        raise GatewayError(400, "input: the conversation has no message or function call output to answer.",
                           param="input", code="invalid_request", error_class="permanent")
    call = ResponsesCall(request=request, response_id=new_response_id(started_unix), created=int(started_unix),
                         conversation=conversation, chat=chat)
    return Call(request_id=request_id, inbound="openai", key=key, body=chat, features=extract_features(chat, "openai"),
                headers=headers, table=table, started=started, started_unix=started_unix, endpoint="responses",
                responses=call)
