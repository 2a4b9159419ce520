"""The contract every wire format implements, and the neutral values passed across it.

A wire module parses its provider's request body into a Prompt, words a Problem as its provider's error
body, and renders a Reply as its provider's JSON or as a StreamBody of event bytes that the delivery
code paces and, under a fault, cuts or corrupts.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from routing.simulator.compose import Reply
from routing.simulator.prompt import Prompt

# Neutral error cases (Problem.case).
INVALID_JSON = "invalid_json"
INVALID_REQUEST = "invalid_request"
MISSING_KEY = "missing_key"
INVALID_KEY = "invalid_key"
PERMISSION = "permission"
MODEL_NOT_FOUND = "model_not_found"
RATE_LIMIT = "rate_limit"
QUOTA = "quota"
CONTEXT_OVERFLOW = "context_overflow"
SERVER_ERROR = "server_error"
UNKNOWN_PATH = "unknown_path"

Headers = list[tuple[bytes, bytes]]


def case_for_status(status: int) -> str:
    """The neutral case a scripted ``status`` fault stands for."""
    cases = {401: INVALID_KEY, 403: PERMISSION, 404: MODEL_NOT_FOUND, 429: RATE_LIMIT}
    if status in cases:
        return cases[status]
    return SERVER_ERROR if status >= 500 else INVALID_REQUEST


@dataclass(frozen=True, slots=True)
class Problem:
    """An error to answer with; each wire module words it as its provider does."""

    case: str
    status: int
    model: str = ""
    message: str | None = None  # overrides the provider's usual wording
    param: str | None = None
    retry_after_s: float | None = None
    key_hint: str = ""  # the rejected key, masked as the provider masks it
    tokens: int = 0  # context overflow: the prompt's tokens
    limit: int = 0  # context overflow: the model's context window
    path: str = ""  # unknown path: the path asked for
    scripted: bool = False  # set by a ``status`` fault: answer with exactly this status


@dataclass(frozen=True, slots=True)
class ErrorReply:
    status: int
    body: bytes


@dataclass(frozen=True, slots=True)
class StreamBody:
    """A streamed answer: ``opening`` goes with the first content chunk, ``closing`` after the last."""

    opening: bytes
    paced: tuple[bytes, ...]  # one entry per content chunk, sent ``chunk_interval`` apart
    closing: bytes


@dataclass(frozen=True, slots=True)
class RenderContext:
    model: str
    token: str  # 24 hex characters unique to the request; response and tool-call ids derive from it
    created: int  # unix seconds
    chunks: int = 8  # content chunks a streamed answer is split into (the model's chunk_count)


class RequestError(Exception):
    """A request body the provider would refuse with a 400; ``param`` names the field."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param


class WireFormat(ABC):
    name: ClassVar[str]
    requires_key: ClassVar[bool] = True
    stream_content_type: ClassVar[bytes] = b"text/event-stream; charset=utf-8"

    @abstractmethod
    def credentials(self, headers: Mapping[str, str], query: Mapping[str, str]) -> tuple[str | None, str | None]:
        """The (header or query name, key) the request authenticates with; (None, None) when absent."""

    def precheck(self, headers: Mapping[str, str], query: Mapping[str, str], model: str) -> Problem | None:
        """A Problem for a missing mandatory header or parameter, before anything else is looked at."""
        return None

    @abstractmethod
    def parse(self, body: Mapping[str, Any], model: str) -> Prompt:
        """The request body as a Prompt; raises RequestError for a body the provider refuses."""

    @abstractmethod
    def render_json(self, ctx: RenderContext, prompt: Prompt, reply: Reply) -> bytes:
        """The complete, non-streamed response body."""

    @abstractmethod
    def render_stream(self, ctx: RenderContext, prompt: Prompt, reply: Reply) -> StreamBody:
        """The streamed response as event bytes."""

    @abstractmethod
    def error(self, problem: Problem) -> ErrorReply:
        """The provider's error response for ``problem``."""

    @abstractmethod
    def stream_error(self, problem: Problem) -> bytes:
        """The event a provider sends when it fails after the stream has begun."""

    def stream_error_after(self, problem: Problem, stream: StreamBody, chunks: int) -> bytes:
        """The in-stream error sent after ``chunks`` content chunks of ``stream``.

        Only formats that number their events (OpenAI Responses) need to know where the error falls.
        """
        return self.stream_error(problem)

    def response_headers(self, ctx: RenderContext) -> Headers:
        """Provider-specific headers added to every response (request ids)."""
        return []

    def error_headers(self, problem: Problem, headers: Headers) -> Headers:
        """The headers of an error response for ``problem``, given a fault's ``Retry-After`` ones (kept by
        default; a provider that names its error in a header, or sends no Retry-After, says so here)."""
        return headers

    def render_models(self, models: Sequence[tuple[str, int]]) -> bytes:
        """The provider's model list for (name, context window) pairs; OpenAI's shape by default."""
        data = [{"id": name, "object": "model", "created": 1700000000, "owned_by": "simulator"} for name, _ in models]
        return dumps({"object": "list", "data": data})


# One encoder for every answer: json.dumps with non-default options builds a new encoder on each call.
_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)
_encode_string = json.encoder.encode_basestring


def dumps(value: Any) -> bytes:
    return _ENCODER.encode(value).encode("utf-8")


def json_string(text: str) -> bytes:
    """``text`` as a JSON string literal; the streamed pieces are spliced into precomputed event bytes."""
    return _encode_string(text).encode("utf-8")


def sse_data(value: Any) -> bytes:
    return b"data: " + dumps(value) + b"\n\n"


def sse_event(name: str, value: Any) -> bytes:
    return b"event: " + name.encode("ascii") + b"\ndata: " + dumps(value) + b"\n\n"


def masked_key(key: str) -> str:
    """A key as providers echo it in their errors: the first three and the last four characters."""
    if len(key) <= 8:
        return "*" * len(key)
    return key[:3] + "*" * (len(key) - 7) + key[-4:]


def text_of(value: Any) -> str:
    return value if isinstance(value, str) else ""
