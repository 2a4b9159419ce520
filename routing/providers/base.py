"""The values an adapter hands the engine, and the adapter interface itself (free of I/O)."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from routing.core.answer import Answer, Usage
from routing.core.table import ModelSpec, ProviderSpec
from routing.providers.capabilities import check_capabilities, required_capabilities
from routing.providers.errors import Inbound, MalformedResponse
from routing.providers.streaming.translators import StreamTranslator

_SECRET_HEADERS = frozenset({"authorization", "api-key", "x-api-key", "x-goog-api-key", "x-amz-security-token"})
_CONTEXT_OVERFLOW_HINTS = (
    "context_length_exceeded",
    "maximum context length",
    "context window",
    "prompt is too long",
    "too many tokens",
    "input token count",
    "exceeds the maximum number of tokens",
)


@dataclass(frozen=True, slots=True)
class ProviderRequest:
    """What an adapter builds for a provider: method, URL, headers and the body as JSON, not yet encoded.

    The gateway encodes it and adds the attempt's timeouts to make the request the HTTP seam sends
    (``routing.clients.upstream.UpstreamRequest``). Its repr hides the key headers, so logging it leaks nothing.
    """

    method: str
    url: str
    headers: dict[str, str]
    json: dict[str, Any] = field(repr=False)

    def __repr__(self) -> str:
        shown = {k: ("********" if k.lower() in _SECRET_HEADERS else v) for k, v in self.headers.items()}
        return f"ProviderRequest(method={self.method!r}, url={self.url!r}, headers={shown!r})"


@dataclass(frozen=True, slots=True)
class ParsedResponse:
    """A 2xx upstream response: the body for the client (in its own shape), its Answer and its Usage."""

    client_body: dict[str, Any]
    answer: Answer
    usage: Usage


@dataclass(frozen=True, slots=True)
class UpstreamError:
    """What a provider's error body says, in any of the three formats."""

    status: int
    message: str
    type: str = ""
    code: str = ""

    @property
    def is_context_overflow(self) -> bool:
        """The request is too long for this model: another model with a larger window may take it."""
        text = f"{self.code} {self.type} {self.message}".lower()
        return any(hint in text for hint in _CONTEXT_OVERFLOW_HINTS)


# Nineteen digits in a row: the shortest run that may spell an integer past 64 bits (orjson reads
# -9223372036854775809 as a float). Such a body, and one orjson refuses, is read by the json module. Found
# by translating every digit to "d" and every other byte to a space: a regular expression scanning the body
# for the run took longer than parsing it.
_AS_DIGIT_RUNS = bytes(ord("d") if byte in b"0123456789" else ord(" ") for byte in range(256))
_LONG_DIGIT_RUN = b"d" * 19


def load_json_body(data: bytes) -> Any:
    """The JSON value of an upstream body, exactly as ``json.loads`` reads it; MalformedResponse otherwise.

    orjson reads the usual answer in a fraction of the json module's CPU, and reads it the same: the same
    values, a duplicate key's last value. What it reads differently is kept from it: an integer past 64 bits,
    which it would turn into a float (a body holding a run of 19 digits anywhere, in a string too, takes the
    json module), and what it refuses (NaN, a number past a double's range, a lone surrogate escape, another
    encoding than UTF-8, nesting past 1,024 levels), which the json module reads or refuses as before.
    """
    if _LONG_DIGIT_RUN not in data.translate(_AS_DIGIT_RUNS):
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            pass
    try:
        return json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:  # too deep is not JSON we can use
        raise MalformedResponse("the upstream response is not JSON") from exc


def client_wants_usage(inbound: Inbound, body: dict[str, Any]) -> bool:
    """Whether the client's stream should carry usage: Anthropic's always does; OpenAI's on request."""
    if inbound == "anthropic":
        return True
    options = body.get("stream_options")
    return isinstance(options, dict) and options.get("include_usage") is True


def join_url(base_url: str, path: str, *, version: str = "") -> str:
    """``base_url`` + ``version`` + ``path``, without doubling a version the operator already wrote."""
    base = base_url.rstrip("/")
    if version and base.endswith(version):
        return base + path
    return base + version + path


class Adapter:
    """One wire format. Pure: builds requests and reads responses; the engine does the I/O."""

    kind = ""

    def build_request(
        self,
        *,
        provider: ProviderSpec,
        model: ModelSpec,
        body: dict[str, Any],
        inbound: Inbound,
        stream: bool,
        api_key: str,
        client_headers: Mapping[str, str] | None = None,
        needs: Mapping[str, str] | None = None,
    ) -> ProviderRequest:
        """The upstream request for a client body, or CapabilityError / RequestShapeError before sending.

        ``client_headers`` (optional, lower- or mixed-case names) lets a format forward the few client
        headers that change what its API does, such as ``anthropic-beta`` to Anthropic. ``needs`` is what
        ``required_capabilities`` found in this same body, when the caller has it already; None scans it.
        """
        check_capabilities(model, required_capabilities(inbound, body) if needs is None else needs)
        payload = self.payload(model=model, body=body, inbound=inbound, stream=stream)
        headers = self.headers(api_key)
        if client_headers:
            headers.update(self.forwarded_headers(client_headers, inbound))
        return ProviderRequest("POST", self.url(provider=provider, model=model, stream=stream), headers, payload)

    def parse_response(
        self, *, status: int, data: bytes, inbound: Inbound, public_model: str, created: int | None = None
    ) -> ParsedResponse:
        """A 2xx body translated for the client; MalformedResponse when it cannot be read."""
        if not 200 <= status < 300:
            raise ValueError(f"parse_response reads success bodies; use parse_error for status {status}")
        return self.translate_response(
            load_json_body(data), inbound=inbound, public_model=public_model,
            created=created if created is not None else int(time.time()),
        )

    def parse_error(self, *, status: int, data: bytes) -> UpstreamError:
        """The provider's error message and type words, whatever the format (never raises)."""
        try:
            body = json.loads(data)
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
            body = None
        error = body.get("error") if isinstance(body, dict) else None
        if isinstance(error, dict):
            return UpstreamError(
                status=status,
                message=str(error.get("message") or ""),
                type=str(error.get("type") or error.get("status") or ""),
                code=str(error.get("code") or ""),
            )
        if isinstance(error, str):
            return UpstreamError(status=status, message=error)
        return UpstreamError(status=status, message=data[:500].decode("utf-8", errors="replace"))

    def stream_translator(
        self, *, inbound: Inbound, public_model: str, client_wants_usage: bool, created: int | None = None
    ) -> StreamTranslator:
        """A fresh translator for one streamed response."""
        return self.translator(
            inbound=inbound, public_model=public_model, client_wants_usage=client_wants_usage,
            created=created if created is not None else int(time.time()),
        )

    # What each format fills in.

    def payload(self, *, model: ModelSpec, body: dict[str, Any], inbound: Inbound, stream: bool) -> dict[str, Any]:
        raise NotImplementedError

    def url(self, *, provider: ProviderSpec, model: ModelSpec, stream: bool) -> str:
        raise NotImplementedError

    def headers(self, api_key: str) -> dict[str, str]:
        raise NotImplementedError

    def forwarded_headers(self, client_headers: Mapping[str, str], inbound: Inbound) -> dict[str, str]:
        """Client headers this format passes on (none by default)."""
        return {}

    def translate_response(
        self, data: Any, *, inbound: Inbound, public_model: str, created: int
    ) -> ParsedResponse:
        raise NotImplementedError

    def translator(
        self, *, inbound: Inbound, public_model: str, client_wants_usage: bool, created: int
    ) -> StreamTranslator:
        raise NotImplementedError
