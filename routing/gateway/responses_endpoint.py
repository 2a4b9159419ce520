"""The call of one Responses API request: checked, its stored conversation in front of its input, and the
equivalent chat body as what routing reads, so tiers, sessions, contracts and capability checks see its tools,
JSON schema and images exactly as they would in a chat completion.

A request that continues a conversation is prepared in two steps: ``responses_call`` checks the body and builds
the call from the request's own input, and ``continue_conversation`` puts the stored conversation in front once
the engine has admitted the key's limits and its access to the model. So a key over its limits, or one that may
not use the model, never has the gateway look at its ``previous_response_id`` or its ``item_reference`` items, let
alone read the database.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from routing.core.features import extract_features
from routing.core.table import KeySpec, RoutingTable
from routing.gateway.gateway_error import GatewayError
from routing.gateway.records import Call
from routing.gateway.stored_responses import conversation_before, issue_response_id, resolve_references
from routing.providers.errors import TranslationError
from routing.providers.responses_api.calls import ResponsesCall
from routing.providers.responses_api.inbound_request import ResponsesRequest, is_reference, parse_responses_request
from routing.providers.responses_api.request_to_chat import responses_to_chat


async def responses_call(body: dict[str, Any], *, request_id: str, key: KeySpec | None, table: RoutingTable,
                         headers: Mapping[str, str], started: float, started_unix: float) -> Call:
    """The engine's call for a Responses body, without the stored conversation of its ``previous_response_id``
    (``continue_conversation`` adds it); GatewayError (400 naming the field) for a bad one."""
    try:
        request = parse_responses_request(body)
    except TranslationError as exc:
        raise GatewayError(400, exc.message, param=exc.param, code=exc.code, error_class="permanent") from None
    # References are resolved once the key is admitted: until then routing reads the request's other items.
    chat = responses_to_chat(request, [item for item in request.items if not is_reference(item)])
    if not _continues(request):  # otherwise the stored items may hold what there is to answer
        _check_answerable(chat)
    key_scope = key.id if key is not None else "open"
    call = ResponsesCall(request=request,
                         response_id=issue_response_id(key_scope=key_scope, stored=request.store,
                                                       now_unix=started_unix),
                         created=int(started_unix), conversation=request.items, chat=chat)
    return Call(request_id=request_id, inbound="openai", key=key, body=chat, features=extract_features(chat, "openai"),
                headers=headers, table=table, started=started, started_unix=started_unix, endpoint="responses",
                responses=call)


def _continues(request: ResponsesRequest) -> bool:
    return request.previous_response_id is not None or any(is_reference(item) for item in request.items)


async def continue_conversation(call: Call) -> None:
    """Put the stored conversation of the call's ``previous_response_id`` in front of its own input, replace its
    ``item_reference`` items by the stored items they name, and route on the whole of it (nothing to do without
    either); GatewayError. Once per call, after its key is admitted."""
    responses = call.responses
    if responses is None or not _continues(responses.request):
        return
    request = responses.request
    before = await conversation_before(request, key_scope=call.key_scope)
    # The turn is stored with its references resolved: a later turn reads it back without this key's index.
    request = dataclasses.replace(request, items=await resolve_references(request.items, key_scope=call.key_scope))
    conversation = [*before, *request.items]
    chat = responses_to_chat(request, conversation)
    _check_answerable(chat)
    call.responses = dataclasses.replace(responses, request=request, conversation=conversation, chat=chat)
    call.body = chat
    call.features = extract_features(chat, "openai")


def _check_answerable(chat: dict[str, Any]) -> None:
    if not any(message["role"] != "system" for message in chat["messages"]):
        raise GatewayError(400, "input: the conversation has no message or function call output to answer.",
                           param="input", code="invalid_request", error_class="permanent")
