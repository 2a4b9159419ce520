"""Session identity, the escalate-only tier pin, and the bounded TTL+LRU map that holds pins in process.

Session detection order (first present, non-blank value wins):

1. headers ``X-Session-Id``, ``X-Claude-Code-Session-Id``, ``Session-Id``, ``X-Litellm-Session-Id``,
   ``Helicone-Session-Id``, ``Agent-Session-Id``;
2. body fields ``metadata.user_id``, ``session_id``, ``prompt_cache_key``, ``user``;
3. otherwise an automatic id: a hash of the model, the system prompt, the tools and the opening messages up
   to and including the first user turn. Later turns append to a conversation without changing its
   opening, so every request of one conversation gets the same automatic id.

Every id is scoped by the gateway key, so two callers never share a pin even if they send the same id,
and is hashed, so a raw id (often a user name or an e-mail address) never reaches a pin store or a log.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

from routing.core.features import Features

SESSION_HEADERS = (
    "X-Session-Id",
    "X-Claude-Code-Session-Id",
    "Session-Id",
    "X-Litellm-Session-Id",
    "Helicone-Session-Id",
    "Agent-Session-Id",
)
_LOWER_SESSION_HEADERS = tuple((name, name.lower()) for name in SESSION_HEADERS)
_SESSION_HEADER_SPELLINGS = frozenset(spelling for pair in _LOWER_SESSION_HEADERS for spelling in pair)
TIERS = ("easy", "hard")  # in escalation order: a pin only ever moves to the right


@dataclass(frozen=True, slots=True)
class SessionId:
    """A session as the pin stores see it.

    ``value`` is ``<key id>:<32 hex digits>``; ``source`` names where the id came from: ``header:<name>``
    (lower case), ``body:<field>`` or ``auto``.
    """

    value: str
    source: str


def detect_session(features: Features, headers: Mapping[str, str], *, key_id: int | str) -> SessionId:
    """The request's session, scoped by the gateway key ``key_id``.

    ``headers`` may be case-insensitive (Django's ``request.headers``) or a plain mapping with lower-case
    names (ASGI); both spellings are tried.
    """
    # A plain dict matches names exactly, so one set operation tells whether any spelling is there at all
    # (most requests send no session header); a case-insensitive mapping is asked name by name.
    if type(headers) is not dict or not headers.keys().isdisjoint(_SESSION_HEADER_SPELLINGS):
        for canonical, lower in _LOWER_SESSION_HEADERS:
            value = headers.get(lower) or headers.get(canonical)
            if isinstance(value, str) and value.strip():
                return _scoped(key_id, "explicit", value.strip(), f"header:{lower}")
    for field, value in (
        ("metadata.user_id", features.metadata_user_id),
        ("session_id", features.session_id),
        ("prompt_cache_key", features.prompt_cache_key),
        ("user", features.user),
    ):
        if value is not None and value.strip():
            return _scoped(key_id, "explicit", value.strip(), f"body:{field}")
    return _scoped(key_id, "auto", _opening_fingerprint(features), "auto")


def _scoped(key_id: int | str, kind: str, raw: str, source: str) -> SessionId:
    # The kind keeps an explicit id from ever colliding with an automatic one.
    digest = hashlib.sha256(f"{kind}\x00{raw}".encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return SessionId(value=f"{key_id}:{digest}", source=source)


# One encoder, reused: ``json.dumps`` with options builds a new encoder per call, which cost ~4x more here.
_CANONICAL_JSON = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, check_circular=False, default=str
)


def _opening_fingerprint(features: Features) -> str:
    """A stable text for what stays the same across the turns of one conversation.

    Tools contribute their kind, name and argument schema (with sorted keys), and messages their role and
    text, so per-turn decorations (Anthropic ``cache_control`` markers move to the newest message) do not
    change the id.
    """
    tools = [[tool.kind, tool.name, tool.parameters] for tool in features.tools]
    try:
        return _CANONICAL_JSON.encode([features.model, features.system_text, tools, features.opening_turns])
    except (ValueError, TypeError, RecursionError):  # a schema too odd to encode: identify tools by name
        names = [[tool.kind, tool.name] for tool in features.tools]
        return _CANONICAL_JSON.encode([features.model, features.system_text, names, features.opening_turns])


@dataclass(frozen=True, slots=True)
class PinDecision:
    """What the tier pin makes of one verdict.

    ``tier`` is the tier to route to; ``escalated`` is True when a live easy pin moves to hard because of
    this request's verdict; ``pinned`` is True when the pin kept the session on a higher tier than the
    verdict chose; ``new_pin`` is the value to store (written on every request, which also slides the TTL).
    """

    tier: str
    escalated: bool
    pinned: bool
    new_pin: str


def apply_tier_pin(verdict_tier: str, pinned_tier: str | None) -> PinDecision:
    """Combine a verdict with the session's current pin: easy -> hard is allowed, hard -> easy never is.

    A pin value that is not a known tier (a corrupted or foreign store entry) counts as no pin.
    """
    if pinned_tier is None or pinned_tier not in TIERS:
        return PinDecision(tier=verdict_tier, escalated=False, pinned=False, new_pin=verdict_tier)
    if verdict_tier not in TIERS or tier_rank(pinned_tier) >= tier_rank(verdict_tier):
        return PinDecision(tier=pinned_tier, escalated=False, pinned=pinned_tier != verdict_tier, new_pin=pinned_tier)
    return PinDecision(tier=verdict_tier, escalated=True, pinned=False, new_pin=verdict_tier)


def tier_rank(tier: str) -> int:
    """The tier's place in the escalation order; -1 for an unknown value."""
    return TIERS.index(tier) if tier in TIERS else -1


K = TypeVar("K")
V = TypeVar("V")


class TtlLruStore(Generic[K, V]):
    """A bounded map whose entries expire after ``ttl`` seconds without being read or written.

    Reading an entry slides its expiry (the TTL it was stored with, counted from ``now``) and marks it
    recently used; storing beyond ``max_entries`` evicts the least recently used entry. Expired entries
    are dropped when met. Time is the caller's ``now`` (seconds on any monotonic clock). A lock makes each
    call atomic, so worker threads may share one store.
    """

    def __init__(self, max_entries: int) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        self.max_entries = max_entries
        self._entries: OrderedDict[K, tuple[V, float, float]] = OrderedDict()  # value, expires_at, ttl
        self._lock = threading.Lock()

    def get(self, key: K, now: float) -> V | None:
        """The live value for ``key`` (its expiry slides to ``now + ttl``), or None."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            value, expires_at, ttl = entry
            if now >= expires_at:
                del self._entries[key]
                return None
            self._entries[key] = (value, now + ttl, ttl)
            self._entries.move_to_end(key)
            return value

    def put(self, key: K, value: V, now: float, ttl: float) -> None:
        """Store ``value`` until ``ttl`` seconds pass without access; a ttl <= 0 removes the key."""
        with self._lock:
            self._store(key, value, now, ttl)

    def upsert(self, key: K, compute: Callable[[V | None], V], now: float, ttl: float) -> V | None:
        """Store ``compute(live value or None)`` as one atomic step and return the previous live value.

        This is how a pin escalates without a race: the decision and the write see the same value.
        """
        with self._lock:
            entry = self._entries.get(key)
            previous = entry[0] if entry is not None and now < entry[1] else None
            self._store(key, compute(previous), now, ttl)
            return previous

    def _store(self, key: K, value: V, now: float, ttl: float) -> None:
        """Write one entry (the caller holds the lock) and evict beyond the bound."""
        if ttl <= 0:
            self._entries.pop(key, None)
            return
        self._entries[key] = (value, now + ttl, ttl)
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)

    def delete(self, key: K) -> None:
        with self._lock:
            self._entries.pop(key, None)

    def __len__(self) -> int:
        """Entries held, including expired ones not yet met (at most ``max_entries``)."""
        return len(self._entries)
