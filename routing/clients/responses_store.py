"""Stored Responses API answers in the database, for ``previous_response_id``.

A conversation is stored once: each row holds one turn (its own input items and its answer) and the id of the
response it continued, so a ten-turn conversation is ten turns of storage, not fifty-five. Continuing one reads
the whole chain of links in one query (a recursive CTE, bounded to ``MAX_TURNS`` rows, with the key's scope and
the expiry of the response asked for checked on the way in). Retention goes by conversation: a turn whose own
time is up is kept while a later turn of the same conversation can still be continued, and the purge deletes a
conversation whole once none of it can (so a chain never loses a link to the purge).

Each output item the client was given is indexed by its id (``StoredResponseItem``, written in the same
transaction as its turn), so a request that sends it back as an ``item_reference`` resolves all of its references
in one query, whatever turn or conversation they come from.

Only Responses requests touch these tables: a write per answer the client asked to store, handed to a worker
thread and never awaited by the answer, and one read for a request that continues a conversation. Writing after
the answer means a client that follows up at once can ask for a response whose row is still on its way. The
caller (routing/gateway/stored_responses.py) knows from the id's MAC whether the id is this key's and was to be
stored, so only then is anything waited for: this process's own write of that response, bounded; or, when the
caller asks for it, a row another process is writing, re-read with growing pauses within ``wait_s``.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import DatabaseError, connection, transaction
from django.db.migrations.recorder import MigrationRecorder
from django.db.models import Exists, OuterRef, Q, Subquery, Value
from django.db.models.functions import Coalesce

from routing.clients.db_thread import in_db_thread
from routing.models import StoredResponse, StoredResponseItem

log = logging.getLogger("gomodel.responses")

LEGACY_GRACE_S = 3600.0  # after this version's migration, old processes of a rolling upgrade may still make ids
MAX_TURNS = 1000  # the most responses one stored conversation may chain; bounds the read of a chain
PENDING_WAIT_S = 1.5  # how long a follow-up waits for this process's own write of the response it names
MAX_ITEM_ID = StoredResponseItem._meta.get_field("item_id").max_length or 200  # longer ids are never indexed
FIRST_REREAD_S = 0.025  # the first pause before looking again for another process's row; each pause doubles

_pending: dict[tuple[str, str], asyncio.Task[None]] = {}  # writes under way here, by (key scope, response id)
_rereading: set[str] = set()  # key scopes with a request looking for items again here (one at a time each)
_legacy_ids_until: float | None = None  # read once per process: see legacy_ids_until
_TURNS_MIGRATION = ("routing", "0016_stored_response_turns")

_TABLE = StoredResponse._meta.db_table
_COLUMNS = ", ".join(f"s.{field.column}" for field in StoredResponse._meta.concrete_fields)
# From the response asked for (this scope's, not expired) back along its links, newest first. A link is followed
# within the same scope only, and whatever the earlier turn's own expiry: the purge keeps a conversation whole
# while any of it can be continued.
_CHAIN_SQL = f"""
WITH RECURSIVE chain AS (
    SELECT {_COLUMNS}, 1 AS turn FROM {_TABLE} s
     WHERE s.response_id = %s AND s.key_scope = %s AND s.expires_at > %s
    UNION ALL
    SELECT {_COLUMNS}, chain.turn + 1 FROM {_TABLE} s
      JOIN chain ON s.response_id = chain.previous_response_id AND s.key_scope = chain.key_scope
     WHERE chain.turn < %s
)
SELECT * FROM chain ORDER BY turn DESC
"""  # noqa: S608 (the names are the model's own; every value is a parameter)


class StoreUnavailable(Exception):
    """The database did not answer; the caller decides what the client hears."""


class BrokenConversation(Exception):
    """The response exists but its conversation cannot be continued: an earlier turn is gone, or it is too long."""


@dataclass(frozen=True)
class Conversation:
    """A stored response and the conversation that leads to it, oldest turn first."""

    response_id: str
    model: str
    instructions: str | None  # the last turn's (not carried into the next turn; kept for the record)
    items: list[dict[str, Any]]  # every turn's input items and answer items, as the next turn's input begins
    turns: int  # how many stored responses the chain has


def _save(response_id: str, key_scope: str, model: str, instructions: str | None, input_items: list[dict[str, Any]],
          output_items: list[dict[str, Any]], created_unix: float, previous_response_id: str | None,
          item_positions: list[tuple[str, int | None]]) -> None:
    created = dt.datetime.fromtimestamp(created_unix, tz=dt.UTC)
    root: Any = None
    if previous_response_id is not None:
        # Where the conversation began, found in the same statement: the parent's own root, or the parent itself
        # when it began it (or when it is gone: the chain is broken anyway, and the purge still finds this row).
        parents_root = StoredResponse.objects.filter(response_id=previous_response_id).values(
            first=Coalesce("root_response_id", "response_id"))[:1]
        root = Coalesce(Subquery(parents_root), Value(previous_response_id))
    # One INSERT for the turn (a response id is new for every request, so there is never a row to update) and one
    # for its items' index, together: an item is never found without its turn.
    with transaction.atomic():
        row = StoredResponse.objects.create(
            response_id=response_id, key_scope=key_scope, model=model, instructions=instructions,
            input_items=input_items, output_items=output_items, created_at=created,
            expires_at=created + dt.timedelta(seconds=settings.GOMODEL_RESPONSES_RETENTION),
            previous_response_id=previous_response_id, root_response_id=root,
        )
        # A provider that repeats an item id within one key: the first turn that had it keeps it. An id longer
        # than the column (no provider's is) is not indexed rather than cut, so it can never name another item.
        StoredResponseItem.objects.bulk_create(
            [StoredResponseItem(item_id=item_id, key_scope=key_scope, response=row, position=position)
             for item_id, position in item_positions if len(item_id) <= MAX_ITEM_ID], ignore_conflicts=True)


def _load_items(item_ids: list[str], key_scope: str) -> dict[str, dict[str, Any] | None]:
    """The stored output items of these ids that this scope may use (its own, their turn not expired), each the
    item that carries it into a next turn or None for one that carries nothing; one query."""
    indexable = [item_id for item_id in item_ids if len(item_id) <= MAX_ITEM_ID]
    rows = (StoredResponseItem.objects
            .filter(key_scope=key_scope, item_id__in=indexable, response__expires_at__gt=dt.datetime.now(tz=dt.UTC))
            .values_list("item_id", "position", "response__output_items"))
    found: dict[str, dict[str, Any] | None] = {}
    for item_id, position, output_items in rows:
        carried = output_items[position] if position is not None and position < len(output_items) else None
        found[item_id] = carried if isinstance(carried, dict) else None
    return found


def _load(response_id: str, key_scope: str) -> Conversation | None:
    """The conversation if this scope may continue it, None if not (unknown, another scope's, expired); one
    query. BrokenConversation for a chain with a missing link or of ``MAX_TURNS`` turns already."""
    # As the ORM would pass it (SQLite, the demo's database, keeps naive UTC text).
    now = connection.ops.adapt_datetimefield_value(dt.datetime.now(tz=dt.UTC))
    rows = list(StoredResponse.objects.raw(_CHAIN_SQL, [response_id, key_scope, now, MAX_TURNS]))
    if not rows:
        return None
    if rows[0].previous_response_id is not None and len(rows) < MAX_TURNS:
        raise BrokenConversation(f"an earlier response of this conversation "
                                 f"('{rows[0].previous_response_id[:100]}') is no longer stored")
    if len(rows) >= MAX_TURNS:
        raise BrokenConversation(f"this conversation has reached {MAX_TURNS} turns, the most a stored conversation "
                                 f"may have; start a new one (its items can be sent as input)")
    items: list[dict[str, Any]] = []
    for row in rows:
        items.extend(row.input_items)
        items.extend(row.output_items)
    last = rows[-1]
    return Conversation(last.response_id, last.model, last.instructions, items, len(rows))


def _legacy_cutoff() -> float:
    applied = MigrationRecorder.Migration.objects.filter(
        app=_TURNS_MIGRATION[0], name=_TURNS_MIGRATION[1]).values_list("applied", flat=True).first()
    return applied.timestamp() + LEGACY_GRACE_S if applied is not None else 0.0


def _purge(batch_size: int) -> int:
    now = dt.datetime.now(tz=dt.UTC)
    live = StoredResponse.objects.filter(expires_at__gt=now)
    deleted = 0
    while True:
        # Conversations with an expired turn and no turn that can still be continued, deleted whole.
        roots = list(
            StoredResponse.objects.filter(expires_at__lte=now)
            .annotate(root=Coalesce("root_response_id", "response_id"))
            .filter(~Exists(live.filter(Q(response_id=OuterRef("root")) | Q(root_response_id=OuterRef("root")))))
            .values_list("root", flat=True).distinct()[:batch_size])
        if not roots:
            return deleted
        # The turns' item index goes with them (on delete cascade); the count is of stored responses only.
        _, by_model = StoredResponse.objects.filter(Q(response_id__in=roots) | Q(root_response_id__in=roots)).delete()
        deleted += by_model.get(StoredResponse._meta.label, 0)


async def _write(pending_key: tuple[str, str], *args: Any) -> None:
    try:
        await in_db_thread(_save)(*args)
    except DatabaseError as exc:  # the answer was sent: the client learns of it when it continues the conversation
        log.warning("responses store: response %s was not stored: %s", pending_key[1], type(exc).__name__)
    finally:
        _pending.pop(pending_key, None)


def save_soon(*, response_id: str, key_scope: str, model: str, instructions: str | None,
              input_items: list[dict[str, Any]], output_items: list[dict[str, Any]], created_unix: float,
              previous_response_id: str | None = None,
              item_positions: list[tuple[str, int | None]] | None = None) -> None:
    """Store one turn in the background (its own input items and answer, linked to the response it continued,
    and the ids of the output items the client was given, each with its place in ``output_items`` or None);
    the caller's answer does not wait for the database."""
    pending_key = (key_scope, response_id)
    task = asyncio.get_running_loop().create_task(
        _write(pending_key, response_id, key_scope, model, instructions, input_items, output_items, created_unix,
               previous_response_id, item_positions or []))
    _pending[pending_key] = task  # also keeps the task referenced until it is done


def pending_writes() -> int:
    """How many writes this process has under way."""
    return len(_pending)


async def load(response_id: str, *, key_scope: str, wait_s: float = 0.0) -> Conversation | None:
    """The stored conversation for this key, or None for an id unknown to it, foreign or expired.

    This process's own write of the response, if under way, is waited for (at most ``PENDING_WAIT_S``); with
    ``wait_s``, a row not found is looked for again, with pauses that double, until ``wait_s`` has passed.
    StoreUnavailable when the database does not answer; BrokenConversation as ``_load`` says.
    """
    pending = _pending.get((key_scope, response_id))
    if pending is not None:
        with contextlib.suppress(TimeoutError):  # then the read below decides
            await asyncio.wait_for(asyncio.shield(pending), timeout=PENDING_WAIT_S)
    read = in_db_thread(_load)
    try:
        found = await read(response_id, key_scope)
        give_up = time.monotonic() + wait_s
        pause = FIRST_REREAD_S
        # Only when no write of it was under way here: then another process may be writing it.
        while found is None and pending is None:
            left = give_up - time.monotonic()
            if left <= 0:
                break
            await asyncio.sleep(min(pause, left))
            pause *= 2
            found = await read(response_id, key_scope)
    except DatabaseError as exc:
        raise StoreUnavailable(type(exc).__name__) from None
    return found


async def load_items(item_ids: list[str], *, key_scope: str, reread: Mapping[str, str] | None = None,
                     wait_s: float = 0.0) -> dict[str, dict[str, Any] | None]:
    """The stored output items of these ids for this key (``_load_items``); an id unknown to it, foreign or expired
    is not in the answer.

    Item ids say nothing of the turn they belong to, so every write of this key's turns under way here is waited
    for first (at most ``PENDING_WAIT_S`` in all). ``reread`` names the ids whose turn another process may still be
    writing, each with the id of its response: one not found is looked for again, with pauses that double, until
    ``wait_s`` has passed or its response's row is there (a turn and its items are written together, so an item
    missing from a written turn never comes), by one request of a key at a time in this process (the others are
    answered after their read). Any other id not found costs that one read.
    StoreUnavailable when the database does not answer.
    """
    pending = [task for (scope, _), task in list(_pending.items()) if scope == key_scope]
    if pending:  # asyncio.wait neither raises nor cancels: past the bound, the read below decides
        await asyncio.wait(pending, timeout=PENDING_WAIT_S)
    reread = reread or {}
    try:
        found = await in_db_thread(_load_items)(item_ids, key_scope)
        give_up = time.monotonic() + wait_s
        missing = {item_id: reread[item_id] for item_id in item_ids if item_id not in found and item_id in reread}
        if not missing or key_scope in _rereading:  # one request of a key at a time waits here; others have read
            return found
        _rereading.add(key_scope)
        try:
            await _look_again(found, missing, key_scope, give_up)
        finally:
            _rereading.discard(key_scope)
    except DatabaseError as exc:
        raise StoreUnavailable(type(exc).__name__) from None
    return found


async def _look_again(found: dict[str, dict[str, Any] | None], missing: dict[str, str], key_scope: str,
                      give_up: float) -> None:
    """Add to ``found`` the items of ``missing`` (item id -> its response id) as they arrive, until ``give_up``
    (monotonic) or until each is found or its response's row is there without it."""
    pause = FIRST_REREAD_S
    while missing:
        more, written = await in_db_thread(_reread)(missing, key_scope)
        found.update(more)
        missing = {item_id: response_id for item_id, response_id in missing.items()
                   if item_id not in found and response_id not in written}
        left = give_up - time.monotonic()
        if not missing or left <= 0:
            break
        await asyncio.sleep(min(pause, left))
        pause *= 2


def _reread(missing: Mapping[str, str], key_scope: str) -> tuple[dict[str, dict[str, Any] | None], set[str]]:
    """The items of ``missing`` found now, and which of their responses are written. The responses are read
    first: a turn written by then has its items in the read that follows."""
    written = set(StoredResponse.objects.filter(key_scope=key_scope, response_id__in=set(missing.values()))
                  .values_list("response_id", flat=True))
    return _load_items(list(missing), key_scope), written


async def legacy_ids_until() -> float:
    """The time (unix) until which this gateway made response ids without a MAC: when the migration that brought
    them in was applied, plus ``LEGACY_GRACE_S`` for the old processes of a rolling upgrade (0 if it is not
    recorded). Read once per process; StoreUnavailable when the database does not answer."""
    global _legacy_ids_until
    if _legacy_ids_until is None:
        try:
            _legacy_ids_until = await in_db_thread(_legacy_cutoff)()
        except DatabaseError as exc:
            raise StoreUnavailable(type(exc).__name__) from None
    return _legacy_ids_until


def purge_expired(batch_size: int = 1000) -> int:
    """Delete the conversations of which no response can be continued any more, in batches of conversations; the
    number of rows deleted (blocking: not for the loop)."""
    return _purge(batch_size)
