"""Stored Responses API answers in the database, for ``previous_response_id``.

Only Responses requests touch this table: a write per answer the client asked to store, handed to a worker
thread and never awaited by the answer, and one primary-key read (the key's scope and the expiry checked on the
row) for a request that continues a conversation. Writing after the answer means a client that follows up at once
can ask for a response whose row is still on its way: a follow-up in the same process waits for that write itself;
in another process, an id the gateway made moments ago (its creation time is in the id) and of which no row exists
yet is looked up again for a short while before it is called unknown. Another key's row, or an expired one, is
answered at once: there is no write to wait for.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import time
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import DatabaseError

from routing.clients.db_thread import in_db_thread
from routing.models import StoredResponse
from routing.providers.responses_ids import response_created_unix

log = logging.getLogger("gomodel.responses")

FRESH_S = 600.0  # an id made this recently may name a row still being written (a long stream stores at its end)
WAIT_S = 1.5  # how long a follow-up looks for such a row
POLL_S = 0.05

_pending: dict[str, asyncio.Task[None]] = {}  # writes under way in this process, by response id


class StoreUnavailable(Exception):
    """The database did not answer; the caller decides what the client hears."""


@dataclass(frozen=True)
class Conversation:
    """A stored response: the items that rebuild its conversation."""

    response_id: str
    model: str
    instructions: str | None
    input_items: list[dict[str, Any]]
    output_items: list[dict[str, Any]]

    @property
    def items(self) -> list[dict[str, Any]]:
        """The whole conversation, as the input of the next turn begins."""
        return [*self.input_items, *self.output_items]


def _save(response_id: str, key_scope: str, model: str, instructions: str | None, input_items: list[dict[str, Any]],
          output_items: list[dict[str, Any]], created_unix: float) -> None:
    created = dt.datetime.fromtimestamp(created_unix, tz=dt.UTC)
    StoredResponse.objects.update_or_create(
        response_id=response_id,
        defaults={"key_scope": key_scope, "model": model, "instructions": instructions, "input_items": input_items,
                  "output_items": output_items, "created_at": created,
                  "expires_at": created + dt.timedelta(seconds=settings.GOMODEL_RESPONSES_RETENTION)},
    )


def _load(response_id: str, key_scope: str) -> tuple[Conversation | None, bool]:
    """The conversation if this scope may continue it, and whether a row of that id exists at all (another key's
    or an expired one: then there is no write to wait for). One primary-key read."""
    row = StoredResponse.objects.filter(response_id=response_id).first()
    if row is None:
        return None, False
    if row.key_scope != key_scope or row.expires_at <= dt.datetime.now(tz=dt.UTC):
        return None, True
    return Conversation(row.response_id, row.model, row.instructions, list(row.input_items),
                        list(row.output_items)), True


def _purge(batch_size: int) -> int:
    now = dt.datetime.now(tz=dt.UTC)
    deleted = 0
    while True:
        ids = list(StoredResponse.objects.filter(expires_at__lte=now).values_list("response_id", flat=True)
                   [:batch_size])
        if not ids:
            return deleted
        count, _ = StoredResponse.objects.filter(response_id__in=ids).delete()
        deleted += count


async def _write(response_id: str, *args: Any) -> None:
    try:
        await in_db_thread(_save)(response_id, *args)
    except DatabaseError as exc:  # the answer was sent: the client learns of it when it continues the conversation
        log.warning("responses store: response %s was not stored: %s", response_id, type(exc).__name__)
    finally:
        _pending.pop(response_id, None)


def save_soon(*, response_id: str, key_scope: str, model: str, instructions: str | None,
              input_items: list[dict[str, Any]], output_items: list[dict[str, Any]], created_unix: float) -> None:
    """Store a response in the background; the caller's answer does not wait for the database."""
    task = asyncio.get_running_loop().create_task(
        _write(response_id, key_scope, model, instructions, input_items, output_items, created_unix))
    _pending[response_id] = task  # also keeps the task referenced until it is done


async def load(response_id: str, *, key_scope: str) -> Conversation | None:
    """The stored response for this key, or None for an id unknown to it, foreign or expired."""
    pending = _pending.get(response_id)
    if pending is not None:
        with contextlib.suppress(TimeoutError):  # then the read below decides
            await asyncio.wait_for(asyncio.shield(pending), timeout=WAIT_S)
    read = in_db_thread(_load)
    try:
        found, exists = await read(response_id, key_scope)
        created = response_created_unix(response_id)
        give_up = time.monotonic() + WAIT_S
        # Nothing under this id yet, and the gateway made it moments ago: its row may still be on its way.
        while not exists and created is not None and 0 <= time.time() - created < FRESH_S:
            if time.monotonic() >= give_up:
                break
            await asyncio.sleep(POLL_S)
            found, exists = await read(response_id, key_scope)
    except DatabaseError as exc:
        raise StoreUnavailable(type(exc).__name__) from None
    return found


def purge_expired(batch_size: int = 1000) -> int:
    """Delete the responses past their retention, in batches; the number deleted (blocking: not for the loop)."""
    return _purge(batch_size)
