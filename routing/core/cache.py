"""The response cache's rules: which name is cached how, whose entry a request may read, and its exact key.

Pure: the store is routing/clients/response_cache_store.py and the request path routing/gateway/response_cache.py.

The key (``exact_key``) is the SHA-256 of the canonical JSON of, in this order: the key version, the cache's
generation (bumped by a purge), the scope (``scope_of``), the client protocol (``openai``, ``anthropic`` or
``responses``: each caches in its own format), the requested name, the workload contract named by
``X-GoModel-Workload``, the ``anthropic-beta`` header (it changes what Anthropic's API answers), and the request
body without its transport fields (``TRANSPORT_FIELDS``). Everything else the client sent (messages or input,
system, tools, tool choice, response format, every sampling parameter, ``max_tokens``, ``n``, any field the gateway
does not know) is in the key, so two requests share an entry only when nothing that can change the answer differs.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from routing.core.ledger import canonical_json

KEY_VERSION = 1
SCOPES = ("key", "team", "global")
Scope = Literal["key", "team", "global"]
Protocol = Literal["openai", "anthropic", "responses"]
Outcome = Literal["hit", "miss", "bypass"]

# Fields that say how the answer travels or who asked, never what it says. ``stream``: a streamed request is
# served from a JSON answer and back. ``user``, ``metadata``, ``safety_identifier``, ``prompt_cache_key``: the
# caller's labels (the scope says whose entry it is). ``store``: whether the provider keeps the answer.
# ``previous_response_id`` is replaced by the conversation it names (``responses_body``).
TRANSPORT_FIELDS = frozenset({"stream", "stream_options", "user", "metadata", "safety_identifier",
                              "prompt_cache_key", "store", "previous_response_id", "background"})


@dataclass(frozen=True, slots=True)
class CacheSpec:
    """One ``caches`` entry: answers of requests for ``name`` are kept ``ttl_s`` seconds, shared within ``scope``."""

    name: str
    ttl_s: float
    scope: Scope = "key"
    generation: int = 0  # a purge bumps it: every key made before then is unreachable
    enabled: bool = True


class DirectiveError(ValueError):
    """A request header of the cache with a value it does not take; ``header`` names it."""

    def __init__(self, header: str, message: str) -> None:
        super().__init__(message)
        self.header = header


@dataclass(frozen=True, slots=True)
class Directive:
    """What one request lets the cache do: read an entry, write its answer."""

    read: bool = True
    write: bool = True
    reason: str = ""  # why not both: "off", "refresh", "no-cache", "no-store"


USE = Directive()


def directive(headers: Mapping[str, str]) -> Directive:
    """The request's cache directive from ``X-GoModel-Cache`` (off | refresh) and ``Cache-Control`` (no-cache,
    no-store); lower-case header names. DirectiveError for an ``X-GoModel-Cache`` value it does not know."""
    own = headers.get("x-gomodel-cache", "").strip().lower()
    if own == "off":
        return Directive(read=False, write=False, reason="off")
    if own == "refresh":
        return Directive(read=False, write=True, reason="refresh")
    if own:
        raise DirectiveError("X-GoModel-Cache", f"X-GoModel-Cache: expected off or refresh, got {own[:40]!r}")
    control = headers.get("cache-control", "")
    if not control:
        return USE
    words = {part.split("=", 1)[0].strip().lower() for part in control.split(",")}
    if "no-store" in words:  # HTTP: nothing of this request or its answer may be kept
        return Directive(read=False, write=False, reason="no-store")
    if "no-cache" in words:  # HTTP: a stored answer may not be used without going to the origin
        return Directive(read=False, write=True, reason="no-cache")
    return USE


def scope_of(spec: CacheSpec, *, key_id: int | str, team: str | None) -> str:
    """Whose entries a request may read and write: its gateway key's (``key:<id>``; ``key:open`` without keys), its
    team's (``team:<name>``; a key in no team keeps to its own), or everyone's (``global``)."""
    if spec.scope == "global":
        return "global"
    if spec.scope == "team" and team:
        return f"team:{team}"
    return f"key:{key_id}"


def cacheable_body(body: Mapping[str, Any]) -> dict[str, Any]:
    """``body`` without its transport fields."""
    return {name: value for name, value in body.items() if name not in TRANSPORT_FIELDS}


def exact_key(spec: CacheSpec, *, scope: str, protocol: Protocol, requested_model: str, body: Mapping[str, Any],
              workload: str = "", betas: str = "") -> str:
    """The entry's key: a SHA-256 hex digest, so the store never sees the prompt (see the module docstring)."""
    material = canonical_json([KEY_VERSION, spec.generation, scope, protocol, requested_model, workload.strip(),
                               betas.strip(), cacheable_body(body)])
    return hashlib.sha256(material.encode()).hexdigest()


def storable_finish(finish_reason: str, *, truncation_allowed: bool) -> bool:
    """Whether an accepted answer that ended with ``finish_reason`` may be kept: a complete one (a natural stop or
    tool calls); one cut at ``max_tokens`` only where the request's contract accepts truncated answers; never one
    the provider filtered or whose end is unknown."""
    if finish_reason in ("stop", "tool_calls"):
        return True
    return finish_reason == "length" and truncation_allowed
