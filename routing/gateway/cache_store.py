"""The response cache's store in this process (memory, or Redis with ``REDIS_URL``) and what its entries hold.

An entry is the JSON of: the entry version, the answer's JSON body in its client protocol, the provider-neutral
answer (for the audit and Responses turns), its usage and cost, the model that answered and the request id that
filled it (routing/gateway/response_cache.py reads them; routing/gateway/cache_fill.py writes them).
"""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings

from routing.clients.cache_sealing import Sealer
from routing.clients.response_cache_store import CacheStore, MemoryCacheStore, RedisCacheStore
from routing.clients.vector_index import MemoryVectorIndex, RedisVectorIndex, VectorIndex
from routing.core.answer import Answer, ToolCall
from routing.core.cache import Protocol
from routing.gateway.records import Call

ENTRY_VERSION = 1
_store: CacheStore | None = None
_vectors: VectorIndex | None = None


def store() -> CacheStore:
    """This process's cache store: Redis when ``REDIS_URL`` is set, else memory; made on first use."""
    global _store
    if _store is None:
        if settings.REDIS_URL:
            _store = RedisCacheStore(settings.REDIS_URL, prefix=settings.GOMODEL_CACHE_KEY_PREFIX,
                                     sealer=Sealer(_secrets()),
                                     max_entry_bytes=settings.GOMODEL_CACHE_MAX_ENTRY_BYTES,
                                     timeout=settings.GOMODEL_CACHE_REDIS_TIMEOUT)
        else:
            _store = MemoryCacheStore(max_bytes=settings.GOMODEL_CACHE_MAX_BYTES,
                                      max_entry_bytes=settings.GOMODEL_CACHE_MAX_ENTRY_BYTES)
    return _store


def vectors() -> VectorIndex:
    """This process's semantic index: Redis when ``REDIS_URL`` is set, else memory; made on first use."""
    global _vectors
    if _vectors is None:
        if settings.REDIS_URL:
            _vectors = RedisVectorIndex(settings.REDIS_URL, prefix=settings.GOMODEL_CACHE_KEY_PREFIX + "v:",
                                        sealer=Sealer(_secrets()),
                                        max_per_partition=settings.GOMODEL_CACHE_SEMANTIC_MAX_PER_PARTITION,
                                        timeout=settings.GOMODEL_CACHE_REDIS_TIMEOUT)
        else:
            _vectors = MemoryVectorIndex(max_partitions=settings.GOMODEL_CACHE_SEMANTIC_MAX_PARTITIONS,
                                         max_per_partition=settings.GOMODEL_CACHE_SEMANTIC_MAX_PER_PARTITION)
    return _vectors


def _secrets() -> list[str]:
    """SECRET_KEY, then SECRET_KEY_FALLBACKS (entries sealed before a rotation still open), as text."""
    return [s.decode() if isinstance(s, bytes) else str(s) for s in (settings.SECRET_KEY,
                                                                       *settings.SECRET_KEY_FALLBACKS)]


def protocol_of(call: Call) -> Protocol:
    """The client protocol an answer is kept in: each caches in its own format."""
    return "responses" if call.responses is not None else call.inbound


def encode_entry(*, body: dict[str, Any], answer: Answer, usage: dict[str, int], cost: float, target: str,
                 request_id: str, created: float) -> bytes:
    entry = {
        "v": ENTRY_VERSION,
        "body": body,
        "answer": {"text": answer.text, "finish_reason": answer.finish_reason, "reasoning_text": answer.reasoning_text,
                   "tool_calls": [[c.id, c.name, c.arguments] for c in answer.tool_calls]},
        "usage": usage,
        "cost": cost,
        "target": target,
        "request_id": request_id,
        "created": created,
    }
    return json.dumps(entry, ensure_ascii=False, separators=(",", ":")).encode()


def decode_entry(raw: bytes) -> dict[str, Any] | None:
    """The entry, or None for bytes that are not one of this version (a miss)."""
    try:
        entry = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(entry, dict) or entry.get("v") != ENTRY_VERSION or not isinstance(entry.get("body"), dict):
        return None
    return entry


def answer_of(entry: dict[str, Any]) -> Answer:
    fields = entry.get("answer") or {}
    calls = tuple(ToolCall(str(c[0]), str(c[1]), str(c[2])) for c in fields.get("tool_calls") or [])
    return Answer(text=str(fields.get("text", "")), finish_reason=str(fields.get("finish_reason", "stop")),
                  tool_calls=calls, reasoning_text=str(fields.get("reasoning_text", "")))
