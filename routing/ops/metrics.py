"""Prometheus metrics. Every label has a bounded set of values: configured names, classes and reasons,
never request ids, session ids or raw client input.

With several worker processes set PROMETHEUS_MULTIPROC_DIR to an empty directory shared by them, so that
``/metrics`` reports the sum over all workers (prometheus_client's multiprocess mode); each value is written in
place in its worker's file (routing/ops/metric_values.py).
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    generate_latest,
    multiprocess,
)

from routing.ops import metric_values
from routing.ops.metric_kinds import Counter, Gauge, Histogram

metric_values.install()  # before the first metric below: each child's value is constructed from ValueClass

M = TypeVar("M", Counter, Gauge, Histogram)
MAX_CACHED_CHILDREN = 10_000


class Labelled(Generic[M]):
    """A labelled metric whose children are looked up in a plain dict.

    prometheus_client's ``labels()`` validates and converts its arguments and takes a lock on every call
    (~3 us; about ten calls per request). The label sets here are bounded by the configuration, so the
    children are cached; past ``MAX_CACHED_CHILDREN`` lookups fall through to ``labels()`` uncached.
    """

    __slots__ = ("metric", "_children")

    def __init__(self, metric: M) -> None:
        self.metric = metric
        self._children: dict[tuple[str, ...], Any] = {}

    def labels(self, *values: str) -> Any:
        try:  # a subscript, not .get(): one Python call fewer for each of the ten or so lookups a request makes
            return self._children[values]
        except KeyError:
            pass
        child = self.metric.labels(*values)
        if len(self._children) < MAX_CACHED_CHILDREN:
            self._children[values] = child
        return child


LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
SCORE_BUCKETS = tuple(float(x) for x in range(0, 21))

REQUESTS = Labelled(
    Counter(
        "gomodel_requests_total",
        "Client requests by endpoint, requested model and status.",
        ["endpoint", "model", "status"],
    )
)
REQUEST_DURATION = Labelled(
    Histogram("gomodel_request_duration_seconds", "Client request duration.", ["endpoint"], buckets=LATENCY_BUCKETS)
)
TTFT = Labelled(
    Histogram(
        "gomodel_time_to_first_token_seconds",
        "Time until the first streamed byte reached the client.",
        ["endpoint"],
        buckets=LATENCY_BUCKETS,
    )
)
ATTEMPTS = Labelled(
    Counter("gomodel_attempts_total", "Upstream attempts by target and outcome reason.", ["target", "outcome"])
)
ATTEMPTS_PER_REQUEST = Histogram(
    "gomodel_attempts_per_request", "Upstream attempts per completed request.", buckets=(1, 2, 3, 4, 5, 8)
)
FALLBACKS = Labelled(
    Counter("gomodel_fallbacks_total", "Fallbacks to another target, by the failure that caused them.", ["reason"])
)
RETRIES = Labelled(
    Counter("gomodel_retries_total", "Same-target retries, by the failure that caused them.", ["reason"])
)
RETRY_BUDGET_EXHAUSTED = Counter(
    "gomodel_retry_budget_exhausted_total", "Retries or fallbacks refused by the gateway-wide retry budget."
)
DEADLINE_EXHAUSTED = Counter(
    "gomodel_deadline_exhausted_total", "Requests that ran out of deadline before an acceptable answer."
)
UPSTREAM_POOL_EXHAUSTED = Labelled(
    Counter(
        "gomodel_upstream_pool_exhausted_total",
        "Requests answered 503 because every upstream connection slot they could use stayed busy, by provider.",
        ["provider"],
    )
)
VALIDATION_REJECTIONS = Labelled(
    Counter("gomodel_validation_rejections_total", "Upstream answers refused by validation, by reason.", ["reason"])
)
AMBIGUOUS = Labelled(
    Counter(
        "gomodel_ambiguous_outcomes_total",
        "Attempts whose effect is unknown (connection lost after sending).",
        ["target"],
    )
)
COST = Labelled(Counter("gomodel_cost_usd_total", "Upstream cost in USD by target.", ["target"]))
COST_PER_ANSWER = Histogram(
    "gomodel_cost_per_accepted_answer_usd",
    "Cost of each accepted answer in USD.",
    buckets=(0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5),
)
ROUTE_LATENCY = Labelled(
    Histogram(
        "gomodel_route_latency_seconds",
        "Request latency by the final route that answered.",
        ["target"],
        buckets=LATENCY_BUCKETS,
    )
)

SMART_REQUESTS = Labelled(
    Counter("gomodel_pro_smartroute_requests_total", "Tier-routed requests by alias and tier.", ["alias", "tier"])
)
CATEGORY_DECISIONS = Labelled(
    Counter(
        "gomodel_category_decisions_total",
        "Requests to a category route by alias and the content category decided (or forced).",
        ["alias", "category"],
    )
)
SMART_ESCALATIONS = Labelled(
    Counter(
        "gomodel_pro_smartroute_escalations_total",
        "Requests sent to hard by the session pin or by their own score, or to the other tier because the chosen one "
        "lacks a capability they need (cause capability).",
        ["alias", "cause"],
    )
)
SMART_OVERRIDES = Labelled(
    Counter(
        "gomodel_pro_smartroute_overrides_total",
        "Requests whose tier was forced or whose classification was bypassed.",
        ["alias", "kind"],
    )
)
SMART_SCORE = Labelled(
    Histogram(
        "gomodel_pro_smartroute_score", "Classifier scores, to tune the threshold.", ["alias"], buckets=SCORE_BUCKETS
    )
)

ROUTING_SELECTIONS = Labelled(
    Counter(
        "gomodel_pro_routing_selections_total",
        "Targets picked by virtual model.",
        ["virtual_model", "strategy", "target"],
    )
)
ROUTING_REJECTIONS = Labelled(
    Counter(
        "gomodel_pro_routing_rejections_total", "Candidates left out of a pick, by reason.", ["virtual_model", "reason"]
    )
)
ROUTING_OUTCOMES = Labelled(
    Counter("gomodel_pro_routing_outcomes_total", "Attempt outcomes by target.", ["target", "outcome"])
)
ROUTING_COOLDOWNS = Labelled(
    Counter("gomodel_pro_routing_cooldowns_total", "Cooldowns started, by target and reason.", ["target", "reason"])
)
ROUTING_AFFINITY = Labelled(
    Counter(
        "gomodel_pro_routing_session_affinity_total",
        "Session pins kept (honored) or given up because the target cooled down (released).",
        ["outcome"],
    )
)
ROUTING_LATENCY_ESTIMATE = Labelled(
    Gauge(
        "gomodel_pro_routing_latency_estimate_seconds",
        "Each target's peak-EWMA latency estimate in this process.",
        ["target"],
        multiprocess_mode="max",
    )
)

# Target health shared across processes and replicas through Redis (routing/gateway/background/shared_sync.py).
SHARED_HEALTH_PUBLISHED = Labelled(
    Counter(
        "gomodel_shared_health_published_total",
        "Health verdicts of this gateway sent to the other processes (open: a cooldown, close: a probe success).",
        ["event"],
    )
)
SHARED_HEALTH_ADOPTED = Labelled(
    Counter(
        "gomodel_shared_health_adopted_total",
        "Health verdicts of other processes applied here (a later cooldown end, or a safe close).",
        ["event"],
    )
)
SHARED_STATE_OUTAGES = Counter(
    "gomodel_shared_state_outages_total",
    "Times a worker lost Redis for shared health and provider limits (it keeps them per process meanwhile).",
)
SHARED_STATE_UP = Gauge(
    "gomodel_shared_state_redis_up",
    "1 while every worker reaches Redis for shared health and provider limits, 0 while one does not.",
    multiprocess_mode="livemin",
)
# Background probes of cooling and locked-out targets (routing/gateway/background/prober.py).
PROBES = Labelled(
    Counter("gomodel_probes_total", "Background probes by target and result (passed, or the failure's reason).",
            ["target", "result"])
)
PROBER_ACTIVE = Gauge(
    "gomodel_prober_active",
    "1 in the process that probes cooling targets (with REDIS_URL: the holder of the cluster's lease), else 0.",
    multiprocess_mode="livesum",
)
TARGET_LIMIT_SKIPS = Labelled(
    Counter(
        "gomodel_target_limit_skips_total",
        "Targets skipped because their provider rpm or tpm for this account was reached, by target and reason.",
        ["target", "reason"],
    )
)

LIMIT_REJECTIONS = Labelled(
    Counter(
        "gomodel_limit_rejections_total",
        "Requests refused with 429 by a key's or team's limit, by key, team and limit (rpm, tpm, concurrency, "
        "budget).",
        ["key", "team", "limit"],
    )
)
BUDGET_ALERTS = Labelled(
    Counter("gomodel_budget_alerts_total", "Budget alert thresholds crossed (each once per budget period), by "
            "scope (key or team), its name and the threshold in percent.", ["scope", "name", "threshold"])
)
SPEND = Labelled(
    Counter("gomodel_spend_usd_total", "Upstream spend in USD by gateway key and team (failed attempts billed "
            "by the provider included).", ["key", "team"])
)
TOKENS = Labelled(
    Counter("gomodel_tokens_total", "Tokens the providers reported by gateway key, team and direction "
            "(input, output).", ["key", "team", "direction"])
)
LIMIT_STORE_FALLBACK = Counter(
    "gomodel_limit_store_fallback_total",
    "Limit checks counted in this process because Redis was unreachable (REDIS_URL set).",
)
LIMIT_STORE_REDIS = Gauge(
    "gomodel_limit_store_redis",
    "1 while this process counts limits in Redis (shared by every process), 0 while it counts them itself.",
    multiprocess_mode="min",
)

CACHE_REQUESTS = Labelled(
    Counter("gomodel_cache_requests_total", "Requests for a cached name by the name and the cache's outcome (hit, "
            "semantic-hit, miss, bypass).", ["name", "outcome"])
)
CACHE_SAVED = Labelled(
    Counter("gomodel_cache_saved_usd_total", "Provider spend in USD that cache hits saved (what the answer cost when "
            "it was filled), by cached name.", ["name"])
)
CACHE_STORED = Labelled(
    Counter("gomodel_cache_stored_total", "Answers written to the response cache, by cached name.", ["name"])
)

# OpenTelemetry traces (docs/observability.md); both stay at zero while tracing is off.
TRACE_SPANS_EXPORTED = Counter(
    "gomodel_otel_spans_exported_total", "Spans the OTLP receiver accepted.",
)
TRACE_SPANS_DROPPED = Labelled(
    Counter("gomodel_otel_spans_dropped_total", "Spans never delivered, by reason: queue_full (the export queue was "
            "full when the request ended: the receiver is slow or down), export_failed (no answer or a retryable "
            "error after the retries), rejected (the receiver refused the batch with a 4xx), shutdown (still queued "
            "when the worker stopped).", ["reason"])
)


def metrics_view(request: HttpRequest) -> HttpResponse:
    """The Prometheus exposition; the sum over worker processes in multiprocess mode."""
    if settings.PROMETHEUS_MULTIPROC_DIR:
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        payload = generate_latest(registry)
    else:
        payload = generate_latest()
    return HttpResponse(payload, content_type=CONTENT_TYPE_LATEST)
