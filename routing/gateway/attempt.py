"""One upstream attempt: send, read, classify, validate. The engine decides what happens next.

A non-streaming attempt ends with an ``AttemptResult`` whose outcome is a success (the answer passed
validation) or a classified failure. A streaming attempt ends either in failure before anything could be
sent to the client (so another attempt may still replace it) or with a ``LiveStream``: the upstream has
produced the first client frames and the engine commits to it.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from routing.clients import aws_signing, upstream
from routing.clients.aws_credentials import credential_cache
from routing.clients.http1 import UpstreamResponse
from routing.core.answer import Answer, Usage, cost_usd
from routing.core.compact_json import compact_json
from routing.core.embeddings import EmbeddingsRequest
from routing.core.error_classifier import classify_exception, classify_http_error
from routing.core.outcome import AttemptOutcome, ErrorClass, ended_by_client_deadline
from routing.core.provider_limits import QuotaTicket, estimated_usage
from routing.core.table import ModelSpec, ProviderSpec
from routing.core.validate import AnswerVerdict, ValidationRules, validate_answer
from routing.providers import MalformedResponse, StreamTranslator, get_adapter
from routing.providers.embeddings import build_embeddings_request, parse_embeddings_response
from routing.providers.errors import Inbound
from routing.providers.responses_api.calls import (
    ResponsesCall,
    build_responses_request,
    parse_responses_answer,
    responses_stream_translator,
)
from routing.schema.engine import validate_instance

MAX_ERROR_BODY_BYTES = 64 * 1024


def model_cost(model: ModelSpec, usage: Usage) -> float | None:
    return cost_usd(
        usage,
        input_price=model.input_price,
        output_price=model.output_price,
        cached_input_price=model.cached_input_price,
    )


def used_tokens(usage: Usage | None, answer: Answer | None, *, input_tokens: int) -> int:
    """The tokens an answered attempt used, for its provider's tpm: the provider's usage, or when it reported
    none (a stream cut short) the input estimate and the output received."""
    if usage is not None and usage.total_tokens > 0:
        return usage.total_tokens
    text = "" if answer is None else answer.text + answer.reasoning_text
    return estimated_usage(input_tokens=input_tokens, output_chars=len(text))


@dataclass
class AttemptResult:
    outcome: AttemptOutcome
    client_body: dict[str, Any] | None = None
    answer: Answer | None = None
    usage: Usage | None = None
    verdict: AnswerVerdict | None = None
    error_body: bytes | None = None  # the upstream's error body, for relaying a client mistake
    ttfb_s: float | None = None
    usage_estimated: bool = False  # the provider reported no usage (Gemini embeddings): the gateway estimated it
    failure_detail: str | None = None  # a TLS failure's verification message, without the host (upstream.py)


@dataclass
class LiveStream:
    """A stream that produced its first client frames; the rest is read while the client is served."""

    response: UpstreamResponse
    chunks: AsyncIterator[bytes]  # the upstream body, already started
    translator: StreamTranslator
    first_frames: list[bytes]
    ttfb_s: float
    started: float
    quota: QuotaTicket | None = None  # its count in the target's provider rpm/tpm, settled when the stream ends
    # When the client's deadline (X-GoModel-Deadline-Ms, the workload contract's) cuts the rest of the stream off;
    # None when the provider's timeout or the gateway's default deadline does (the attempt loop sets it).
    client_deadline_at: float | None = None

    def blame(self, failure: AttemptOutcome, now: float) -> AttemptOutcome:
        """``failure`` of the relayed stream, marked as the client's when the client's deadline cut it off."""
        if ended_by_client_deadline(failure, now=now, cut_at=self.client_deadline_at):
            return failure.by_client()
        return failure


@dataclass(frozen=True)
class AttemptSpec:
    """What one attempt sends where. Its repr masks the provider key, so logging a spec leaks nothing."""

    provider: ProviderSpec
    model: ModelSpec
    body: dict[str, Any]
    inbound: Inbound
    stream: bool
    api_key: str = field(repr=False)
    timeout_s: float
    rules: ValidationRules
    client_wants_usage: bool
    embeddings: EmbeddingsRequest | None = None  # set: an embeddings request instead of a chat one
    responses: ResponsesCall | None = None  # set: a Responses API request (``body`` is its chat equivalent)
    # The client's request headers (lower-case names): an adapter passes on the few that change what its API
    # does (``anthropic-beta`` to Anthropic, OpenRouter's attribution headers); no other header leaves.
    client_headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    needs: Mapping[str, str] | None = None  # the body's ``required_capabilities``, scanned once per request

    def __repr__(self) -> str:
        shown = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in fields(self) if f.repr)
        return f"AttemptSpec({shown}, api_key='********')"


def _request(spec: AttemptSpec) -> upstream.UpstreamRequest:
    if spec.embeddings is not None:
        built = build_embeddings_request(spec.provider, spec.model, spec.embeddings, spec.api_key)
    elif spec.responses is not None:
        built = build_responses_request(provider=spec.provider, model=spec.model, call=spec.responses,
                                        stream=spec.stream, api_key=spec.api_key, client_headers=spec.client_headers,
                                        needs=spec.needs)
    else:
        built = get_adapter(spec.provider.kind).build_request(
            provider=spec.provider, model=spec.model, body=spec.body, inbound=spec.inbound, stream=spec.stream,
            api_key=spec.api_key, client_headers=spec.client_headers, needs=spec.needs,
        )
    payload = compact_json(built.json)
    timeout = min(spec.timeout_s, spec.provider.timeout_s)
    return upstream.build(built.method, built.url, built.headers, payload, timeout, stream=spec.stream,
                          provider=spec.provider)


async def _signed(request: upstream.UpstreamRequest, provider: ProviderSpec) -> upstream.UpstreamRequest:
    """A Bedrock request without an API key, signed with SigV4 over its exact body (aws_signing). The credentials
    come from the cache; CredentialsUnavailable (none configured or found) propagates: nothing was sent."""
    return aws_signing.sign(request, await credential_cache.get(provider), region=provider.region)


async def run_json_attempt(spec: AttemptSpec) -> AttemptResult:
    """A non-streaming attempt to its end. TranslationError, CredentialsUnavailable and PoolExhausted propagate:
    nothing was sent."""
    request = _request(spec)
    if spec.provider.kind in aws_signing.SIGNED_KINDS and not spec.api_key:
        request = await _signed(request, spec.provider)
    started = time.monotonic()
    ttfb: float | None = None
    try:
        response = await upstream.send(request)  # closes its connection itself when cancelled
        ttfb = time.monotonic() - started
        try:
            data = await response.aread()
        finally:
            # Also on cancellation (the client hung up): an unread body closes the connection at once, so
            # the provider stops generating and billing.
            await response.aclose()
    except Exception as exc:
        if not upstream.is_transport_error(exc):
            raise
        kind = upstream.exception_kind(exc, first_byte_seen=ttfb is not None)
        return AttemptResult(classify_exception(kind, latency_s=time.monotonic() - started), ttfb_s=ttfb,
                             failure_detail=upstream.failure_detail(exc))
    latency = time.monotonic() - started
    if response.status_code >= 300:
        outcome = classify_http_error(
            response.status_code, response.header_dict(), data[:MAX_ERROR_BODY_BYTES], spec.provider.kind,
            latency_s=latency, now_unix=time.time(),
        )
        return AttemptResult(outcome, error_body=data[:MAX_ERROR_BODY_BYTES], ttfb_s=ttfb)
    if spec.embeddings is not None:
        return _embeddings_result(spec, spec.embeddings, data, status=response.status_code, latency=latency,
                                  ttfb=ttfb)
    try:
        if spec.responses is not None:
            parsed = parse_responses_answer(kind=spec.provider.kind, status=response.status_code, data=data,
                                            public_model=spec.model.name, call=spec.responses)
        else:
            parsed = get_adapter(spec.provider.kind).parse_response(
                status=response.status_code, data=data, inbound=spec.inbound, public_model=spec.model.name
            )
    except MalformedResponse:
        outcome = AttemptOutcome.failure(
            ErrorClass.INVALID_RESPONSE, "malformed", status=response.status_code, latency_s=latency
        )
        return AttemptResult(outcome, verdict=AnswerVerdict(ok=False, reason="malformed"), ttfb_s=ttfb)
    verdict = validate_answer(parsed.answer, spec.rules, schema_validator=validate_instance)
    return AttemptResult(
        verdict.as_outcome(latency_s=latency, status=response.status_code),
        client_body=parsed.client_body,
        answer=parsed.answer,
        usage=parsed.usage,
        verdict=verdict,
        ttfb_s=ttfb,
    )


def _embeddings_result(spec: AttemptSpec, request: EmbeddingsRequest, data: bytes, *, status: int, latency: float,
                       ttfb: float | None) -> AttemptResult:
    """A 2xx embeddings answer: vectors are either all there and numeric, or the attempt is a malformed one."""
    try:
        parsed = parse_embeddings_response(spec.provider.kind, data, request, spec.model.name,
                                           dimensions=request.dimensions or spec.model.dimensions)
    except MalformedResponse:
        outcome = AttemptOutcome.failure(ErrorClass.INVALID_RESPONSE, "malformed", status=status, latency_s=latency)
        return AttemptResult(outcome, verdict=AnswerVerdict(ok=False, reason="malformed"), ttfb_s=ttfb)
    verdict = AnswerVerdict(ok=True)
    return AttemptResult(verdict.as_outcome(latency_s=latency, status=status), client_body=parsed.client_body,
                         answer=Answer(finish_reason="stop"), usage=parsed.usage, verdict=verdict, ttfb_s=ttfb,
                         usage_estimated=parsed.usage_estimated)


async def start_stream_attempt(spec: AttemptSpec) -> AttemptResult | LiveStream:
    """Send, and read until the first client frames exist (LiveStream) or the attempt failed.

    Cancelled at any point (the client hung up), it closes the provider connection before it re-raises.
    """
    request = _request(spec)
    if spec.provider.kind in aws_signing.SIGNED_KINDS and not spec.api_key:
        request = await _signed(request, spec.provider)
    started = time.monotonic()
    try:
        response = await upstream.send(request)
    except Exception as exc:
        if not upstream.is_transport_error(exc):
            raise
        kind = upstream.exception_kind(exc, first_byte_seen=False)
        return AttemptResult(classify_exception(kind, latency_s=time.monotonic() - started),
                             failure_detail=upstream.failure_detail(exc))
    if response.status_code >= 300:
        try:
            data = await response.aread()
        except Exception as exc:
            if not upstream.is_transport_error(exc):
                raise
            data = b""
        finally:
            await response.aclose()
        outcome = classify_http_error(
            response.status_code, response.header_dict(), data[:MAX_ERROR_BODY_BYTES], spec.provider.kind,
            latency_s=time.monotonic() - started, now_unix=time.time(),
        )
        return AttemptResult(outcome, error_body=data[:MAX_ERROR_BODY_BYTES])

    if spec.responses is not None:
        translator = responses_stream_translator(kind=spec.provider.kind, public_model=spec.model.name,
                                                 call=spec.responses)
    else:
        translator = get_adapter(spec.provider.kind).stream_translator(
            inbound=spec.inbound, public_model=spec.model.name, client_wants_usage=spec.client_wants_usage
        )
    chunks = response.aiter_raw()
    frames: list[bytes] = []
    got_bytes = False
    try:
        # Frames are held back until one carries content (or the stream ends): a provider's opening
        # role-only chunk tells the client nothing, and while nothing was sent the attempt can be replaced.
        while not (frames and translator.has_content):
            try:
                chunk = await chunks.__anext__()
            except StopAsyncIteration:
                frames += translator.finish()
                if not translator.complete:
                    frames = []  # ended before saying anything: a failed attempt, not an answer
                break
            got_bytes = True
            frames += translator.feed(chunk)
            if translator.failure is not None:
                frames = []
                break
    except MalformedResponse:
        await response.aclose()
        return AttemptResult(AttemptOutcome.failure(
            ErrorClass.INVALID_RESPONSE, "malformed", status=response.status_code,
            latency_s=time.monotonic() - started))
    except Exception as exc:
        await response.aclose()
        if not upstream.is_transport_error(exc):
            raise
        # Before any client byte, a cut stream is the provider's failure and may be replaced.
        kind = upstream.exception_kind(exc, first_byte_seen=got_bytes)
        outcome = classify_exception(kind, latency_s=time.monotonic() - started)
        if got_bytes:
            outcome = AttemptOutcome.failure(
                ErrorClass.TRANSIENT, "stream_cut", status=response.status_code, latency_s=outcome.latency_s)
        return AttemptResult(outcome)
    except BaseException:
        await response.aclose()  # cancelled: the provider connection goes now, not when it is collected
        raise
    ttfb = time.monotonic() - started
    if not frames:
        await response.aclose()
        failure = translator.failure
        reason = "stream_cut" if failure is None else ("overloaded" if "overload" in failure.error_type else
                                                          "server_error")
        return AttemptResult(AttemptOutcome.failure(
            ErrorClass.TRANSIENT, reason, status=response.status_code, latency_s=ttfb))
    return LiveStream(response=response, chunks=chunks, translator=translator, first_frames=frames, ttfb_s=ttfb,
                      started=started)
