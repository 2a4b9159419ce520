"""Responses API conversations kept for ``previous_response_id``: continue one, and keep a new answer.

The store is routing/clients/responses_store.py. An id that is unknown, expired or another key's gets the same
400 naming ``previous_response_id``, so one caller can never learn about, let alone read, another's conversation.
Following OpenAI, a stored response's ``instructions`` are not carried into the next turn: a request that wants
them sends them again.
"""

from __future__ import annotations

from typing import Any

from routing.clients import responses_store
from routing.gateway.gateway_error import GatewayError
from routing.gateway.records import Call, Journey
from routing.providers.responses_request import ResponsesRequest, answer_items


async def conversation_before(request: ResponsesRequest, *, key_scope: int | str) -> list[dict[str, Any]]:
    """The stored conversation ``request`` continues (empty without ``previous_response_id``); GatewayError."""
    previous = request.previous_response_id
    if previous is None:
        return []
    try:
        stored = await responses_store.load(previous, key_scope=str(key_scope))
    except responses_store.StoreUnavailable:
        raise GatewayError(503, "previous_response_id needs the database, which is not reachable; retry later.",
                           code="responses_store_unavailable", param="previous_response_id",
                           headers={"Retry-After": "5"}, error_class="transient") from None
    if stored is None:
        raise GatewayError(400, f"Previous response with id '{previous[:100]}' not found.",
                           code="previous_response_not_found", param="previous_response_id",
                           error_class="permanent")
    return stored.items


def remember(call: Call, journey: Journey) -> None:
    """Keep an accepted Responses answer whose client did not say ``store: false`` (written in the background)."""
    responses = call.responses
    if responses is None or not responses.request.store or journey.answer is None:
        return
    responses_store.save_soon(
        response_id=responses.response_id, key_scope=str(call.key_scope), model=journey.requested_model,
        instructions=responses.request.instructions, input_items=responses.conversation,
        output_items=answer_items(journey.answer), created_unix=call.started_unix,
    )
