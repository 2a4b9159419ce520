"""The spans of one finished request, built from its ``Call`` and ``Journey`` (what the audit event is built from).

One SERVER span for the request, named ``{gen_ai.operation.name} {requested model}``, and one CLIENT child span per
upstream attempt, named ``{gen_ai.operation.name} {upstream model}``, with the OpenTelemetry GenAI semantic
conventions' attributes (semconv 1.37: ``gen_ai.provider.name``) and the routing decision under ``gomodel.*``
(docs/observability.md lists every attribute). Nothing here reads a clock or does I/O; encoding happens later, in
the exporter's thread. Attributes are handed over as tuples of strings and numbers: the garbage collector stops
tracking such tuples, so the spans waiting in the queue add almost nothing to its full collections.
"""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import urlsplit

from routing.core.answer import Usage
from routing.core.otlp_proto import (
    KIND_CLIENT,
    KIND_SERVER,
    STATUS_ERROR,
    AttributeValue,
    SpanData,
)
from routing.core.table import RoutingTable
from routing.core.trace_context import TraceParent
from routing.gateway.records import AttemptRecord, Call, Journey

SCHEMA_URL = "https://opentelemetry.io/schemas/1.37.0"
MAX_TEXT = 256  # client-chosen strings (an unknown model name) are cut to this

# gen_ai.provider.name's well-known values by provider kind; a kind without one is named by itself.
PROVIDER_NAMES = {
    "openai": "openai", "azure_openai": "azure.ai.openai", "anthropic": "anthropic", "gemini": "gcp.gemini",
    "cohere": "cohere", "bedrock": "aws.bedrock", "vertex": "gcp.vertex_ai", "vertex_anthropic": "gcp.vertex_ai",
    "mistral": "mistral_ai", "groq": "groq", "deepseek": "deepseek",
}
_OPERATIONS = {"embeddings": "embeddings", "count_tokens": "count_tokens"}
_servers: dict[str, tuple[str, int | None]] = {}  # base URL -> (host, port), parsed once per URL


Attributes = list[tuple[str, AttributeValue]]


def request_spans(call: Call, journey: Journey, elapsed_s: float, *, trace_id: bytes, parent: TraceParent | None,
                  trace_state: str, new_span_id: Callable[[], bytes]) -> list[SpanData]:
    """The request's span followed by one span per attempt, in the order the attempts were made."""
    operation = _OPERATIONS.get(call.endpoint, "chat")
    table = call.table
    start_ns = int(call.started_unix * 1e9)
    end_ns = start_ns + int(elapsed_s * 1e9)
    flags = (parent.flags | 1) if parent is not None else 1  # only sampled traces are exported
    root_id = new_span_id()
    requested = journey.requested_model
    known = bool(table.kind_of(requested))
    attributes = _request_attributes(call, journey, operation)
    root = SpanData(trace_id=trace_id, span_id=root_id, parent_span_id=parent.span_id if parent else b"",
                    name=f"{operation} {requested}" if known else operation, kind=KIND_SERVER, start_ns=start_ns,
                    end_ns=end_ns, attributes=tuple(attributes), trace_state=trace_state, trace_flags=flags,
                    remote_parent=parent is not None)
    if journey.status >= 500:  # a 4xx is the client's mistake: the server span stays unset, as HTTP's conventions say
        root.status_code, root.status_message = STATUS_ERROR, (journey.error_message or "")[:MAX_TEXT]
    spans = [root]
    last = journey.attempts[-1] if journey.attempts else None
    for record in journey.attempts:
        started = start_ns + int((record.started - call.started) * 1e9)
        outcome = record.outcome
        ended = started + int(outcome.latency_s * 1e9) if outcome is not None else end_ns
        model = table.models.get(record.target)
        upstream = model.upstream if model is not None else record.target
        span = SpanData(trace_id=trace_id, span_id=new_span_id(), parent_span_id=root_id,
                        name=f"{operation} {upstream}", kind=KIND_CLIENT, start_ns=started,
                        end_ns=max(started, min(ended, end_ns)), trace_state=trace_state, trace_flags=flags,
                        attributes=tuple(_attempt_attributes(call, journey, record, operation, upstream,
                                                             final=record is last)))
        if outcome is not None and not outcome.ok:
            span.status_code, span.status_message = STATUS_ERROR, (record.error_message or outcome.reason)[:MAX_TEXT]
        spans.append(span)
    return spans


def _request_attributes(call: Call, journey: Journey, operation: str) -> Attributes:
    table = call.table
    answered = journey.answered_by
    out: Attributes = [
        ("gen_ai.operation.name", operation),
        ("gen_ai.request.model", journey.requested_model[:MAX_TEXT]),
        ("http.response.status_code", journey.status),
        ("gomodel.request.id", call.request_id),
        ("gomodel.request.endpoint", call.audit_endpoint),
        ("gomodel.request.stream", call.features.stream),
        ("gomodel.attempts", len(journey.attempts)),
    ]
    if call.features.max_output_tokens is not None:
        out.append(("gen_ai.request.max_tokens", call.features.max_output_tokens))
    if answered is not None:
        out.append(("gen_ai.response.model", answered.upstream))
        out.append(("gen_ai.provider.name", _provider_name(table, answered.provider)))
        out.append(("gomodel.target", answered.name))
    elif journey.cache is not None and journey.cache.target:
        out.append(("gomodel.target", journey.cache.target))  # a hit: the model whose answer was kept
    _usage(out, journey.usage)
    if journey.usage_estimated:
        out.append(("gomodel.usage.estimated", True))
    if journey.answer is not None and journey.status < 400:
        out.append(("gen_ai.response.finish_reasons", (journey.answer.finish_reason,)))
    if journey.status >= 400:
        out.append(("error.type", journey.error_class or str(journey.status)))
    if journey.cost is not None:
        out.append(("gomodel.cost_usd", journey.cost))
    if call.key is not None:
        out.append(("gomodel.key.name", call.key.name))
        if call.key.team_name:
            out.append(("gomodel.team", call.key.team_name))
    if journey.limit_refused:
        out.append(("gomodel.limit", journey.limit_refused))
    _decision(out, journey)
    return out


def _decision(out: Attributes, journey: Journey) -> None:
    """The routing decision: tier, category, policy, the first virtual model's pick, cache, fallback."""
    tier = journey.tier
    if tier is not None:
        out += [("gomodel.tier.alias", tier.alias), ("gomodel.tier.name", tier.tier),
                ("gomodel.tier.score", tier.score), ("gomodel.tier.target", tier.target)]
        if tier.pinned:
            out.append(("gomodel.tier.pinned", True))
        if tier.escalation:
            out.append(("gomodel.tier.escalation", tier.escalation))
    category = journey.category
    if category is not None:
        out += [("gomodel.category.name", category.category), ("gomodel.category.rule", category.rule),
                ("gomodel.category.target", category.target)]
    policy = journey.policy
    if policy is not None:
        out += [("gomodel.policy.name", policy.current.name), ("gomodel.policy.chain", policy.chain)]
    plan = journey.plan
    if plan is not None and plan.records:
        first = plan.records[0]
        out += [("gomodel.routing.virtual_model", first.virtual_model), ("gomodel.routing.strategy", first.strategy)]
        if first.selection is not None and first.selection.explored:
            out.append(("gomodel.routing.explored", True))
    if journey.contract is not None and journey.contract.workload:
        out.append(("gomodel.workload", journey.contract.workload))
    cache = journey.cache
    if cache is not None:
        out += [("gomodel.cache.name", cache.name), ("gomodel.cache.outcome", cache.outcome)]
    for attempt in journey.attempts:
        if attempt.action == "fallback":
            outcome = attempt.outcome
            out.append(("gomodel.fallback.reason", outcome.reason if outcome is not None else "skipped"))
            break


def _attempt_attributes(call: Call, journey: Journey, record: AttemptRecord, operation: str, upstream: str, *,
                        final: bool) -> Attributes:
    table = call.table
    provider = table.providers.get(record.provider)
    outcome = record.outcome
    out: Attributes = [
        ("gen_ai.operation.name", operation),
        ("gen_ai.provider.name", _provider_name(table, record.provider)),
        ("gen_ai.request.model", upstream),
        ("gomodel.target", record.target),
        ("gomodel.provider", record.provider),
        ("gomodel.attempt.seq", record.seq),
        ("gomodel.attempt.action", record.action),
        ("gomodel.attempt.outcome", outcome.reason if outcome is not None else "unfinished"),
    ]
    if provider is not None:
        host, port = _server(provider.base_url)
        if host:
            out.append(("server.address", host))
        if port is not None:
            out.append(("server.port", port))
    if outcome is not None and outcome.status is not None:
        out.append(("http.response.status_code", outcome.status))
    if outcome is not None and outcome.ok:
        out.append(("gen_ai.response.model", upstream))
        if final and journey.answer is not None:
            out.append(("gen_ai.response.finish_reasons", (journey.answer.finish_reason,)))
    elif outcome is not None:
        out.append(("error.type", outcome.reason))
        if outcome.error_class is not None:
            out.append(("gomodel.attempt.error_class", str(outcome.error_class)))
    _usage(out, record.usage)
    if record.ttfb_s is not None:
        out.append(("gomodel.attempt.ttfb_ms", round(record.ttfb_s * 1000, 3)))
    if record.cost is not None:
        out.append(("gomodel.cost_usd", record.cost))
    return out


def _usage(out: Attributes, usage: Usage | None) -> None:
    if usage is not None:
        out += [("gen_ai.usage.input_tokens", usage.input_tokens), ("gen_ai.usage.output_tokens", usage.output_tokens)]


def _provider_name(table: RoutingTable, provider: str) -> str:
    spec = table.providers.get(provider)
    kind = spec.kind if spec is not None else provider
    return PROVIDER_NAMES.get(kind, kind)


def _server(base_url: str) -> tuple[str, int | None]:
    """The provider's host and port (the scheme's default when the URL names none), parsed once per URL."""
    found = _servers.get(base_url)
    if found is None:
        try:
            parts = urlsplit(base_url)
            port = parts.port or {"https": 443, "http": 80}.get(parts.scheme)
            found = (parts.hostname or "", port)
        except ValueError:
            found = ("", None)
        if len(_servers) < 1024:
            _servers[base_url] = found
    return found
