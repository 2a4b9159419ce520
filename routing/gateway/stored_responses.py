"""Responses API conversations kept for ``previous_response_id`` and ``item_reference``: issue an id, continue
one, resolve references, keep a new answer.

The store is routing/clients/responses_store.py. A response id carries a MAC over its creation time, whether it
was to be stored and the gateway key it was made for (routing/providers/responses_api/ids.py, keyed from the Django
SECRET_KEY), so the id alone answers most follow-ups that cannot succeed: an id the gateway never made, another
key's, one of a response not stored (``store: false``) or older than the retention is refused without touching the
database. Every such refusal, and an id unknown or expired in the database, is the same 400 naming
``previous_response_id``, so one caller can never learn about, let alone read, another's conversation. Only a
genuine id of this key made moments ago is waited for, as its row may still be on its way.

Ids made before ids carried a MAC keep working for their own key until they expire: such an id is read once (its
row says whose it is) and never waited for, and only if it claims to be made before this version was installed
(``responses_store.legacy_ids_until``) and within the retention; so a GOMODEL_RESPONSES_RETENTION after the
upgrade, no id of that form reaches the database at all.

The output items of a stored response are kept by id too: a request's ``item_reference`` items are replaced by
the items they name (``resolve_references``, one read for all of them), so the provider, which never stores
anything for the gateway, receives the items themselves. An id not found is looked for again only when it may be
in a turn another process is still writing: an item id the gateway made holds its response's id, so only one made
for this key, in a response to be stored, moments ago, and only until that response's row is there (its items are
written with it). Any other id (made up, another key's, a provider's own, one of a turn already written) costs a
read or two and no waiting, so a caller cannot hold a request open, or make the database read again and again,
with ids nobody wrote.

Following OpenAI, a stored response's ``instructions`` are not carried into the next turn: a request that wants
them sends them again.
"""

from __future__ import annotations

import functools
import time
from typing import Any

from django.conf import settings

from routing.clients import responses_store
from routing.gateway.gateway_error import GatewayError
from routing.gateway.records import Call, Journey
from routing.providers.responses_api.ids import new_response_id, read_response_id, response_id_key, response_id_of_item
from routing.providers.responses_api.inbound_request import (
    ResponsesRequest,
    answer_items,
    is_reference,
    output_positions,
)

FRESH_S = 600.0  # an id made this recently may name a row still being written (a long stream stores at its end)
WAIT_S = 1.5  # how long a follow-up looks for such a row written by another process
CLOCK_SKEW_S = 60.0  # an id made by another host whose clock is a little ahead is not from the future


@functools.lru_cache(maxsize=4)
def _keys(secrets: tuple[str, ...]) -> tuple[bytes, ...]:
    return tuple(response_id_key(secret) for secret in secrets)


def id_keys() -> tuple[bytes, ...]:
    """The response id MAC keys: from SECRET_KEY (new ids), then from each of SECRET_KEY_FALLBACKS (so ids made
    before a key rotation keep working while the old key is listed there)."""
    return _keys((settings.SECRET_KEY, *settings.SECRET_KEY_FALLBACKS))


def issue_response_id(*, key_scope: int | str, stored: bool, now_unix: float) -> str:
    """A new response id for this key (its id, or ``open``), saying whether the response is to be stored."""
    return new_response_id(now_unix, scope=str(key_scope), stored=stored, key=id_keys()[0])


def _not_found(previous: str) -> GatewayError:
    return GatewayError(400, f"Previous response with id '{previous[:100]}' not found.",
                        code="previous_response_not_found", param="previous_response_id", error_class="permanent")


async def conversation_before(request: ResponsesRequest, *, key_scope: int | str) -> list[dict[str, Any]]:
    """The stored conversation ``request`` continues (empty without ``previous_response_id``); GatewayError."""
    previous = request.previous_response_id
    if previous is None:
        return []
    scope = str(key_scope)
    info = read_response_id(previous, scope=scope, keys=id_keys())
    if info is None or not info.stored:
        raise _not_found(previous)
    age = time.time() - info.created_unix
    if not -CLOCK_SKEW_S <= age < settings.GOMODEL_RESPONSES_RETENTION:
        raise _not_found(previous)
    # Only a genuine id of this key, made moments ago, may name a row another process is still writing.
    wait_s = WAIT_S if not info.legacy and age < FRESH_S else 0.0
    try:
        if info.legacy and info.created_unix > await responses_store.legacy_ids_until():
            raise _not_found(previous)  # the gateway no longer made ids of that form then
        stored = await responses_store.load(previous, key_scope=scope, wait_s=wait_s)
    except responses_store.StoreUnavailable:
        raise _store_unavailable("previous_response_id") from None
    except responses_store.BrokenConversation as exc:
        raise GatewayError(400, f"Previous response with id '{previous[:100]}' cannot be continued: {exc}.",
                           code="previous_response_unusable", param="previous_response_id",
                           error_class="permanent") from None
    if stored is None:
        raise _not_found(previous)
    return stored.items


def _store_unavailable(param: str) -> GatewayError:
    return GatewayError(503, f"{param} needs the database, which is not reachable; retry later.",
                        code="responses_store_unavailable", param=param, headers={"Retry-After": "5"},
                        error_class="transient")


async def resolve_references(items: list[dict[str, Any]], *, key_scope: int | str) -> list[dict[str, Any]]:
    """``items`` with each ``item_reference`` replaced by the stored output item it names (left out when that item
    carries nothing into a next turn, as reasoning text does not); one read for all of them. GatewayError: 400
    naming ``input[i].id`` for an id this key has no stored item of (unknown, another key's, expired, of a
    response not stored), 503 when the database does not answer."""
    wanted = list(dict.fromkeys(item["id"] for item in items if is_reference(item)))
    if not wanted:
        return items
    scope = str(key_scope)
    try:
        reread = {item: response_id for item in wanted if (response_id := _on_its_way(item, scope)) is not None}
        found = await responses_store.load_items(wanted, key_scope=scope, reread=reread, wait_s=WAIT_S)
    except responses_store.StoreUnavailable:
        raise _store_unavailable("input") from None
    resolved: list[dict[str, Any]] = []
    for i, item in enumerate(items):
        if not is_reference(item):
            resolved.append(item)
            continue
        if item["id"] not in found:
            raise GatewayError(400, f"Item with id '{item['id'][:100]}' not found.", code="item_not_found",
                               param=f"input[{i}].id", error_class="permanent")
        carried = found[item["id"]]
        if carried is not None:
            resolved.append(carried)
    return resolved


def _on_its_way(item: str, scope: str) -> str | None:
    """The response whose turn an item id not found may still be on its way in from another process, or None: an
    id the gateway made for this key, in a response to be stored, in the last ``FRESH_S``."""
    response_id = response_id_of_item(item)
    info = read_response_id(response_id, scope=scope, keys=id_keys()) if response_id is not None else None
    if info is None or info.legacy or not info.stored:
        return None
    return response_id if -CLOCK_SKEW_S <= time.time() - info.created_unix < FRESH_S else None


def remember(call: Call, journey: Journey) -> None:
    """Keep an accepted Responses answer whose client did not say ``store: false`` (written in the background):
    this turn's own input items and answer, linked to the response it continued."""
    responses = call.responses
    if responses is None or not responses.request.store or journey.answer is None:
        return
    request = responses.request
    carried = answer_items(journey.answer)
    responses_store.save_soon(
        response_id=responses.response_id, key_scope=str(call.key_scope), model=journey.requested_model,
        instructions=request.instructions, input_items=request.items, output_items=carried,
        created_unix=call.started_unix, previous_response_id=request.previous_response_id,
        item_positions=output_positions(responses.output.items(), carried),
    )
