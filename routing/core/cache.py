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
Outcome = Literal["hit", "semantic-hit", "miss", "bypass"]

# Fields that say how the answer travels or who asked, never what it says. ``stream``: a streamed request is
# served from a JSON answer and back. ``user``, ``metadata``, ``safety_identifier``, ``prompt_cache_key``: the
# caller's labels (the scope says whose entry it is). ``store``: whether the provider keeps the answer.
# ``previous_response_id`` is replaced by the conversation it names (``responses_body``).
TRANSPORT_FIELDS = frozenset({"stream", "stream_options", "user", "metadata", "safety_identifier",
                              "prompt_cache_key", "store", "previous_response_id", "background"})


@dataclass(frozen=True, slots=True)
class SemanticSpec:
    """A cache's semantic matching: the latest user turn is embedded by the gateway's ``embeddings`` model and the
    nearest kept answer of the same context served when its cosine similarity is at least ``threshold``."""

    embeddings: str
    threshold: float = 0.95


@dataclass(frozen=True, slots=True)
class CacheSpec:
    """One ``caches`` entry: answers of requests for ``name`` are kept ``ttl_s`` seconds, shared within ``scope``."""

    name: str
    ttl_s: float
    scope: Scope = "key"
    generation: int = 0  # a purge bumps it: every key made before then is unreachable
    enabled: bool = True
    semantic: SemanticSpec | None = None


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


def semantic_partition(spec: CacheSpec, *, scope: str, protocol: Protocol, requested_model: str,
                       context: Mapping[str, Any], workload: str = "", betas: str = "") -> str:
    """The partition a semantic entry is searched in: a digest of what ``exact_key`` reads but the latest user turn
    (``context``: the body without it), and of the embeddings model. So only a request of the same scope, protocol,
    name, system, tools, parameters and conversation before the turn can match, whatever its turn says."""
    semantic = spec.semantic.embeddings if spec.semantic is not None else ""
    material = canonical_json(["semantic", KEY_VERSION, spec.generation, scope, protocol, requested_model,
                               workload.strip(), betas.strip(), semantic, cacheable_body(context)])
    return hashlib.sha256(material.encode()).hexdigest()


def latest_user_turn(protocol: Protocol, body: Mapping[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """The text of the request's last turn when it is the user's and text only, and the body without it (what a
    paraphrase must share); None otherwise (an image, a tool result, an assistant prefill: exact matching only).

    ``body`` is what ``exact_key`` reads: for Responses, ``input`` is the whole conversation."""
    field = "input" if protocol == "responses" else "messages"
    turns = body.get(field)
    if protocol == "responses" and isinstance(turns, str):
        return (turns, {**body, field: []}) if turns.strip() else None
    if not isinstance(turns, list) or not turns:
        return None
    last = turns[-1]
    if not isinstance(last, Mapping) or last.get("role") != "user":
        return None
    if protocol == "responses" and last.get("type", "message") != "message":
        return None
    text = _text_of(last.get("content"))
    if not text or not text.strip():
        return None
    return text, {**body, field: list(turns[:-1])}


def _text_of(content: Any) -> str | None:
    """A turn's text: a string, or parts that are all text (``text``, ``input_text``); None for anything else."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list) or not content:
        return None
    texts = []
    for part in content:
        if not isinstance(part, Mapping) or part.get("type") not in ("text", "input_text") \
                or not isinstance(part.get("text"), str):
            return None
        texts.append(part["text"])
    return "\n".join(texts)


def storable_finish(finish_reason: str, *, truncation_allowed: bool) -> bool:
    """Whether an accepted answer that ended with ``finish_reason`` may be kept: a complete one (a natural stop or
    tool calls); one cut at ``max_tokens`` only where the request's contract accepts truncated answers; never one
    the provider filtered or whose end is unknown."""
    if finish_reason in ("stop", "tool_calls"):
        return True
    return finish_reason == "length" and truncation_allowed
