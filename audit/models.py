"""What the audit keeps: one AuditRevision per client request, its AttemptRecords, and ConfigRevisions.

Rows are written by ``audit.services`` only (the Celery worker or, in the demo, the publisher thread) and
are never changed afterwards. Free-text columns hold redacted text (see ``audit.delivery.redact``); no column ever
holds a provider key or a gateway key's secret.

The history pages read AuditRevision with keyset pagination on ``(created_at, id)`` descending, so every
filter the pages offer has a composite index ending in ``created_at, id``.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q

# The auditor filters that get their own composite index (field, -created_at, -id).
FILTERED_FIELDS = (
    "key_id",
    "key_name",
    "team",
    "session_hash",
    "requested_model",
    "tier",
    "target",
    "status",
    "error_class",
    "config_version",
)


# Filters on a decision most requests do not take (a category route, a routing policy, a limit's refusal): their
# indexes hold only the rows that took it, so a request without one costs no index write for them.
SPARSE_FILTERED_FIELDS = ("category", "policy", "limit_refused")


def _filter_indexes() -> list[models.Index]:
    return [
        models.Index(fields=[field, "-created_at", "-id"], name=f"audit_rev_{field}_idx")
        for field in FILTERED_FIELDS
    ]


def sparse_filter_indexes() -> list[models.Index]:
    """The partial indexes of SPARSE_FILTERED_FIELDS (``<field> <> ''``), built concurrently by migration 0007."""
    return [
        models.Index(fields=[field, "-created_at", "-id"], name=f"audit_rev_{field}_idx", condition=~Q(**{field: ""}))
        for field in SPARSE_FILTERED_FIELDS
    ]


class AuditRevision(models.Model):
    """One client request and every decision taken for it."""

    request_id = models.CharField(max_length=64, unique=True)
    operation_id = models.CharField(max_length=128, blank=True, default="")
    created_at = models.DateTimeField(help_text="When the gateway received the request.")
    received_at = models.DateTimeField(auto_now_add=True, help_text="When the audit stored it.")

    key_id = models.BigIntegerField(null=True, blank=True, help_text="The gateway key's id (never its secret).")
    key_name = models.CharField(max_length=200, blank=True, default="")
    team = models.CharField(max_length=200, blank=True, default="", help_text="The key's team, if any, by name.")
    session_hash = models.CharField(max_length=64, blank=True, default="")
    session_source = models.CharField(max_length=40, blank=True, default="")

    endpoint = models.CharField(max_length=16, blank=True, default="")
    requested_model = models.CharField(max_length=200, blank=True, default="")
    stream = models.BooleanField(default=False)
    workload = models.CharField(max_length=100, blank=True, default="")
    deadline_ms = models.IntegerField(null=True, blank=True)
    config_version = models.IntegerField(null=True, blank=True)

    # The tier verdict (empty tier: the requested model was not a tier alias).
    tier_alias = models.CharField(max_length=200, blank=True, default="")
    tier = models.CharField(max_length=16, blank=True, default="")
    tier_target = models.CharField(max_length=200, blank=True, default="")
    score = models.FloatField(null=True, blank=True)
    signals = models.JSONField(default=list, blank=True)
    reasoning_shortcut = models.BooleanField(default=False)
    tier_forced = models.BooleanField(default=False)
    tier_pinned = models.BooleanField(default=False)
    tier_escalated = models.BooleanField(default=False)
    pin_before = models.CharField(max_length=16, blank=True, default="")
    tier_escalation = models.CharField(
        max_length=16, blank=True, default="",
        help_text="Why the tier used is not the one the verdict and the pin chose: capability (the chosen tier "
                  "could not serve the request).",
    )

    # The category route's decision (empty category: the requested model was not a category route).
    category = models.CharField(max_length=32, blank=True, default="")
    category_rule = models.CharField(max_length=16, blank=True, default="", help_text="The rule that decided it.")
    category_detail = models.CharField(max_length=200, blank=True, default="",
                                       help_text="What triggered the rule (a keyword, an evidence, a count).")
    category_alias = models.CharField(max_length=200, blank=True, default="")
    category_target = models.CharField(max_length=200, blank=True, default="")

    # The routing policy (empty: none): the one in force at the end, the chain walked (X-GoModel-Policy's value,
    # "fast>cheap"), and the decision with each fallback step and its reason.
    policy = models.CharField(max_length=200, blank=True, default="")
    policy_chain = models.CharField(max_length=500, blank=True, default="")
    policy_detail = models.JSONField(default=dict, blank=True)

    # The selection: which target won and why.
    virtual_model = models.CharField(max_length=200, blank=True, default="")
    strategy = models.CharField(max_length=32, blank=True, default="")
    winner = models.CharField(max_length=200, blank=True, default="")
    selection_why = models.CharField(max_length=500, blank=True, default="")
    explored = models.BooleanField(default=False, help_text="The adaptive exploration share drew the winner.")
    exploration = models.FloatField(null=True, blank=True, help_text="The exploration share in force (0: none).")
    affinity = models.CharField(max_length=16, blank=True, default="")
    candidates = models.JSONField(default=list, blank=True)
    skipped = models.JSONField(default=list, blank=True)
    rejected = models.JSONField(default=list, blank=True, help_text="Targets the workload contract filtered out.")
    nested_selections = models.JSONField(default=list, blank=True, help_text="Selections in nested virtual models.")

    # The outcome.
    limit_refused = models.CharField(
        max_length=32, blank=True, default="",
        help_text="The limit that refused the request with a 429, <key|team>:<rpm|tpm|concurrency|budget>.",
    )
    target = models.CharField(max_length=200, blank=True, default="", help_text="The target that answered.")
    status = models.IntegerField(null=True, blank=True)
    error_class = models.CharField(max_length=32, blank=True, default="")
    error_message = models.TextField(blank=True, default="")
    validation = models.CharField(max_length=64, blank=True, default="")
    latency_ms = models.FloatField(default=0.0)
    ttfb_ms = models.FloatField(null=True, blank=True)
    input_tokens = models.BigIntegerField(default=0)
    output_tokens = models.BigIntegerField(default=0)
    cached_input_tokens = models.BigIntegerField(default=0)
    reasoning_tokens = models.BigIntegerField(default=0)
    cost_usd = models.FloatField(null=True, blank=True)
    # What the providers billed for this request: every attempt that came back with usage, answers that
    # validation rejected included (the columns above count only the answer the client got). Null in rows
    # stored before these columns existed; the spend pages read the columns above for those.
    billed_cost_usd = models.FloatField(null=True, blank=True)
    billed_input_tokens = models.BigIntegerField(null=True, blank=True)
    billed_output_tokens = models.BigIntegerField(null=True, blank=True)
    usage_estimated = models.BooleanField(
        default=False,
        help_text="Some usage is the gateway's estimate: the provider's never arrived (a client that hung up, a "
                  "stream cut short), or the provider reports none.",
    )
    # The response cache (empty outcome: the requested name is not cached): hit, semantic-hit, miss or bypass, why
    # it was not read or written, and for a hit the request that filled the entry, what its answer had cost and, for
    # a semantic hit, the similarity.
    cache_outcome = models.CharField(max_length=16, blank=True, default="")
    cache_reason = models.CharField(max_length=16, blank=True, default="",
                                    help_text="off, refresh, no-cache or no-store: why the cache was not read or "
                                              "not written.")
    cache_filled_by = models.CharField(max_length=64, blank=True, default="",
                                       help_text="The request id whose answer a hit served.")
    cache_saved_usd = models.FloatField(null=True, blank=True,
                                        help_text="What the served answer had cost when it was filled.")
    cache_similarity = models.FloatField(null=True, blank=True,
                                         help_text="A semantic hit's cosine similarity to the kept answer's turn.")
    attempt_count = models.PositiveSmallIntegerField(default=0)
    fell_back = models.BooleanField(default=False, help_text="Another target was tried after the first.")

    # Bodies: hashes and redacted previews by default; full (capped) text only with AUDIT_STORE_BODIES.
    prompt_hash = models.CharField(max_length=64, blank=True, default="")
    prompt_preview = models.CharField(max_length=200, blank=True, default="")
    prompt_text = models.TextField(blank=True, default="")
    output_hash = models.CharField(max_length=64, blank=True, default="")
    output_preview = models.CharField(max_length=200, blank=True, default="")
    output_text = models.TextField(blank=True, default="")

    class Meta:
        ordering = ("-created_at", "-id")
        indexes = [
            models.Index(fields=["-created_at", "-id"], name="audit_rev_created_idx"),
            *_filter_indexes(),
            *sparse_filter_indexes(),
        ]

    def __str__(self) -> str:
        return f"{self.request_id} {self.requested_model} -> {self.target or '-'} ({self.status})"

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


class AttemptRecord(models.Model):
    """One upstream attempt made for a request, in order."""

    revision = models.ForeignKey(AuditRevision, on_delete=models.CASCADE, related_name="attempts")
    seq = models.PositiveSmallIntegerField()
    attempt_id = models.CharField(max_length=64, blank=True, default="", db_index=True)
    target = models.CharField(max_length=200, blank=True, default="")
    provider = models.CharField(max_length=100, blank=True, default="")
    status = models.IntegerField(null=True, blank=True)
    error_class = models.CharField(max_length=32, blank=True, default="")
    reason = models.CharField(max_length=200, blank=True, default="")
    action = models.CharField(max_length=32, blank=True, default="")
    validation = models.CharField(max_length=64, blank=True, default="")
    latency_ms = models.FloatField(default=0.0)
    ttfb_ms = models.FloatField(null=True, blank=True)
    input_tokens = models.BigIntegerField(default=0)
    output_tokens = models.BigIntegerField(default=0)
    cached_input_tokens = models.BigIntegerField(default=0)
    reasoning_tokens = models.BigIntegerField(default=0)
    cost_usd = models.FloatField(null=True, blank=True)
    usage_estimated = models.BooleanField(
        default=False, help_text="This attempt's usage is the gateway's estimate, not the provider's.",
    )
    health_status = models.CharField(max_length=16, blank=True, default="")
    health = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ("revision", "seq")
        constraints = [models.UniqueConstraint(fields=["revision", "seq"], name="audit_attempt_revision_seq_uniq")]

    def __str__(self) -> str:
        return f"#{self.seq} {self.target} {self.status or self.error_class or ''} {self.action}"


class ConfigRevision(models.Model):
    """One committed change of the routing configuration: the whole config after it, and the diff."""

    version = models.PositiveIntegerField(unique=True)
    author = models.CharField(max_length=150, blank=True, default="")
    source = models.CharField(max_length=32, blank=True, default="", help_text="admin, file, or other.")
    created_at = models.DateTimeField(db_index=True)
    snapshot = models.JSONField(default=dict, blank=True)
    diff = models.TextField(blank=True, default="")
    summary = models.CharField(max_length=500, blank=True, default="")

    class Meta:
        ordering = ("-version",)

    def __str__(self) -> str:
        return f"version {self.version} by {self.author or 'unknown'} ({self.source})"


class UndeliverableEvent(models.Model):
    """An event the database refused even alone (it should never happen): kept verbatim, not dropped."""

    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    request_id = models.CharField(max_length=64, blank=True, default="")
    error = models.TextField()
    payload = models.TextField(help_text="The redacted event as JSON (ASCII-escaped).")

    class Meta:
        ordering = ("-created_at",)

    def __str__(self) -> str:
        return f"{self.request_id or '?'}: {self.error[:80]}"


# The upper bounds (ms) of the latency histogram kept per rollup row; a last bucket holds everything slower.
LATENCY_BOUNDS_MS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 60000)
LATENCY_COLUMNS = tuple(f"lat_{i:02d}" for i in range(len(LATENCY_BOUNDS_MS) + 1))
# The columns that identify one rollup row (its unique constraint, in this order).
ROLLUP_DIMENSIONS = ("span", "bucket", "key_id", "key_name", "team", "model", "tier", "status")
NO_KEY = -1  # the rollup's key_id of a request that presented no gateway key (a gateway running open)


class RevisionRollup(models.Model):
    """Requests per time bucket per key, team, model, tier and status, summed: what the dashboard reads.

    Written in the transaction that inserts the revisions (audit.rollup), so a redelivered batch, whose revisions
    are already stored, adds nothing. Each request is counted in a minute bucket (span 60, kept two days) and an
    hour bucket (span 3600, kept as long as revisions). The latency histogram's counts give p50/p99.
    """

    span = models.PositiveIntegerField(help_text="The bucket's length in seconds: 60 or 3600.")
    bucket = models.DateTimeField(help_text="The bucket's start (UTC).")
    key_id = models.BigIntegerField(default=NO_KEY, help_text="The gateway key's id; -1: no key.")
    key_name = models.CharField(max_length=200, blank=True, default="")
    team = models.CharField(max_length=200, blank=True, default="")
    model = models.CharField(max_length=200, blank=True, default="", help_text="The model the client asked for.")
    tier = models.CharField(max_length=16, blank=True, default="")
    status = models.IntegerField(default=0, help_text="The HTTP status answered; 0: none recorded.")
    requests = models.BigIntegerField(default=0)
    cost_usd = models.FloatField(default=0.0, help_text="What the providers billed (as the spend pages count it).")
    input_tokens = models.BigIntegerField(default=0)
    output_tokens = models.BigIntegerField(default=0)
    latency_ms_sum = models.FloatField(default=0.0)
    # The response cache's lookups (a bypass is none): answered from an exact entry, from a semantic neighbour, or
    # routed after a miss. Their sum is the cacheable lookups the dashboard's hit rate divides by.
    cache_hits = models.BigIntegerField(default=0)
    cache_semantic_hits = models.BigIntegerField(default=0)
    cache_misses = models.BigIntegerField(default=0)
    lat_00 = models.BigIntegerField(default=0)
    lat_01 = models.BigIntegerField(default=0)
    lat_02 = models.BigIntegerField(default=0)
    lat_03 = models.BigIntegerField(default=0)
    lat_04 = models.BigIntegerField(default=0)
    lat_05 = models.BigIntegerField(default=0)
    lat_06 = models.BigIntegerField(default=0)
    lat_07 = models.BigIntegerField(default=0)
    lat_08 = models.BigIntegerField(default=0)
    lat_09 = models.BigIntegerField(default=0)
    lat_10 = models.BigIntegerField(default=0)
    lat_11 = models.BigIntegerField(default=0)
    lat_12 = models.BigIntegerField(default=0)
    lat_13 = models.BigIntegerField(default=0)
    lat_14 = models.BigIntegerField(default=0)
    lat_15 = models.BigIntegerField(default=0)

    class Meta:
        ordering = ("-bucket",)
        constraints = [models.UniqueConstraint(fields=list(ROLLUP_DIMENSIONS), name="audit_rollup_dimensions_uniq")]

    def __str__(self) -> str:
        return f"{self.bucket:%Y-%m-%d %H:%M} +{self.span}s {self.key_name or '-'} {self.model}: {self.requests}"


class BudgetAlert(models.Model):
    """A key or team crossed a threshold of its budget: one row per scope, budget period and threshold.

    The unique constraint is what makes a threshold fire once, whatever happened before (a restart, a Redis that
    lost its keys, processes counting on their own): the first alert recorded owns the row (``alert_id``) and only
    its owner posts the webhook. The row also keeps how delivery went."""

    PENDING, DELIVERED, FAILED, NO_WEBHOOK = "pending", "delivered", "failed", "no_webhook"
    DELIVERY = [(PENDING, "pending"), (DELIVERED, "delivered"), (FAILED, "failed"), (NO_WEBHOOK, "no webhook")]

    alert_id = models.UUIDField(unique=True)
    fired_at = models.DateTimeField(db_index=True)
    scope_kind = models.CharField(max_length=8)  # "key" or "team"
    scope_ident = models.CharField(max_length=120)  # key:<id> or team:<name>
    scope_name = models.CharField(max_length=100)
    team = models.CharField(max_length=100, blank=True, default="")
    period = models.CharField(max_length=24)  # day:2026-12-02, week:2026-11-30, month:2026-12, total
    budget_period = models.CharField(max_length=5)
    threshold = models.PositiveSmallIntegerField()  # percent
    budget_usd = models.DecimalField(max_digits=16, decimal_places=6)
    spend_usd = models.DecimalField(max_digits=18, decimal_places=9)
    webhook = models.CharField(max_length=300, blank=True, default="", help_text="The receiver's origin only.")
    delivery = models.CharField(max_length=10, choices=DELIVERY, default=PENDING)
    attempts = models.PositiveIntegerField(default=0)
    last_status = models.PositiveSmallIntegerField(null=True, blank=True)
    last_error = models.CharField(max_length=300, blank=True, default="")
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ("-fired_at",)
        constraints = [models.UniqueConstraint(fields=["scope_ident", "period", "threshold"],
                                               name="budget_alert_once_per_period")]

    def __str__(self) -> str:
        return f"{self.scope_kind} {self.scope_name}: {self.threshold}% of {self.budget_usd} USD ({self.period})"
