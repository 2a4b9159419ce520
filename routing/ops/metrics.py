"""Prometheus metrics. Every label has a bounded set of values: configured names, classes and reasons,
never request ids, session ids or raw client input.

With several worker processes set PROMETHEUS_MULTIPROC_DIR to an empty directory shared by them, so that
``/metrics`` reports the sum over all workers (prometheus_client's multiprocess mode).
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
)

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
        child = self._children.get(values)
        if child is None:
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
SMART_ESCALATIONS = Labelled(
    Counter(
        "gomodel_pro_smartroute_escalations_total",
        "Requests sent to hard by the session pin or by their own score.",
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


def metrics_view(request: HttpRequest) -> HttpResponse:
    """The Prometheus exposition; the sum over worker processes in multiprocess mode."""
    if settings.PROMETHEUS_MULTIPROC_DIR:
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        payload = generate_latest(registry)
    else:
        payload = generate_latest()
    return HttpResponse(payload, content_type=CONTENT_TYPE_LATEST)
