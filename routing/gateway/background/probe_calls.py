"""One background probe sent to one target with one key, and what came of it (the prober decides the rest).

The request is built by ``routing.providers.probes`` and goes through the same HTTP seam as every attempt
(``routing.clients.upstream``: connection pool, proxy and TLS settings per provider, response caps); its failures
are classified by the same rules (``routing.core.error_classifier``), so a probe's 401 is the same ``auth`` a
client's request would get. A probe never takes a request's connection slot for long: it has its own short
deadline.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

from routing.clients import aws_signing, upstream
from routing.clients.aws_credentials import CredentialsUnavailable, credential_cache
from routing.clients.http1 import PoolExhausted
from routing.core.answer import Usage
from routing.core.error_classifier import classify_exception, classify_http_error
from routing.core.outcome import AttemptOutcome, ErrorClass
from routing.core.probes import ProbeMode
from routing.core.table import ModelSpec, ProviderSpec
from routing.gateway.attempt import MAX_ERROR_BODY_BYTES, model_cost
from routing.providers import MalformedResponse, TranslationError, get_adapter
from routing.providers.base import ProviderRequest
from routing.providers.probes import completion_request, models_answer_proves, models_request

PROBE_TIMEOUT_S = 10.0  # a probe is a tiny call: a provider that needs longer is not back yet


@dataclass(frozen=True, slots=True)
class ProbeCall:
    """What one probe came to: the outcome (as an attempt's), and for a completion the usage and its price."""

    outcome: AttemptOutcome
    mode: ProbeMode
    usage: Usage | None = None
    cost: float | None = None


def build_probe(provider: ProviderSpec, model: ModelSpec, mode: ProbeMode,
                api_key: str) -> tuple[ProbeMode, ProviderRequest]:
    """The probe's request: the models call when asked for and the format has one, else a one-token completion.

    Raises TranslationError when the model cannot take even that completion (it is then reported, not sent).
    """
    if mode == "models":
        built = models_request(provider, model, api_key)
        if built is not None:
            return "models", built
    return "completion", completion_request(provider, model, api_key)


async def send_probe(provider: ProviderSpec, model: ModelSpec, mode: ProbeMode, api_key: str) -> ProbeCall:
    """Send one probe and classify its answer; never raises for anything the provider or the network does.

    A models call whose 2xx answer does not prove the model (it is not listed, or the listing does not parse) is
    followed by a one-token completion with the same key, whose outcome is the probe's: a listing may leave out
    a model the provider serves, and only an answer about the model itself may lock it out.
    """
    call = await _send_one(provider, model, mode, api_key)
    if call.mode == "models" and not call.outcome.ok and call.outcome.status is not None and \
            200 <= call.outcome.status < 300:
        return await _send_one(provider, model, "completion", api_key)
    return call


async def _send_one(provider: ProviderSpec, model: ModelSpec, mode: ProbeMode, api_key: str) -> ProbeCall:
    try:
        mode, built = build_probe(provider, model, mode, api_key)
    except TranslationError:
        return ProbeCall(AttemptOutcome.failure(ErrorClass.INCOMPATIBLE, "unsupported"), mode)
    payload = b"" if built.method == "GET" else json.dumps(built.json, separators=(",", ":")).encode()
    request = upstream.build(built.method, built.url, built.headers, payload,
                             min(PROBE_TIMEOUT_S, provider.timeout_s), provider=provider)
    if provider.kind in aws_signing.SIGNED_KINDS and not api_key:  # Bedrock without an API key: SigV4
        try:
            request = aws_signing.sign(request, await credential_cache.get(provider), region=provider.region)
        except CredentialsUnavailable:
            return ProbeCall(AttemptOutcome.failure(ErrorClass.INCOMPATIBLE, "key_unavailable"), mode)
    started = time.monotonic()
    first_byte = False
    try:
        response = await upstream.send(request)
        first_byte = True
        try:
            data = await response.aread()
        finally:
            await response.aclose()
    except PoolExhausted:
        # Every connection slot is serving clients: nothing was sent, nothing is learned about the provider.
        return ProbeCall(AttemptOutcome.failure(ErrorClass.TRANSIENT, "gateway_overloaded"), mode)
    except Exception as exc:
        if not upstream.is_transport_error(exc):
            raise
        kind = upstream.exception_kind(exc, first_byte_seen=first_byte)
        return ProbeCall(classify_exception(kind, latency_s=time.monotonic() - started), mode)
    latency = time.monotonic() - started
    status = response.status_code
    if status >= 300:
        outcome = classify_http_error(status, response.header_dict(), data[:MAX_ERROR_BODY_BYTES], provider.kind,
                                      latency_s=latency, now_unix=time.time())
        return ProbeCall(outcome, mode)
    if mode == "models":
        try:
            proves = models_answer_proves(provider.kind, data, model)
        except MalformedResponse:
            return ProbeCall(AttemptOutcome.failure(ErrorClass.INVALID_RESPONSE, "malformed", status=status,
                                                    latency_s=latency), mode)
        if not proves:  # the key works, but the provider does not know (or no longer lists) this model
            return ProbeCall(AttemptOutcome.failure(ErrorClass.INCOMPATIBLE, "not_found", status=status,
                                                    latency_s=latency), mode)
        return ProbeCall(AttemptOutcome.success(latency, status), mode)
    try:
        parsed = get_adapter(provider.kind).parse_response(status=status, data=data, inbound="openai",
                                                           public_model=model.name)
    except MalformedResponse:
        return ProbeCall(AttemptOutcome.failure(ErrorClass.INVALID_RESPONSE, "malformed", status=status,
                                                latency_s=latency), mode)
    # Any parsed answer proves the target: one token says nothing about quality, and validation is for clients.
    return ProbeCall(AttemptOutcome.success(latency, status), mode, parsed.usage, model_cost(model, parsed.usage))
