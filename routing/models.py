"""The routing configuration, edited in the admin and compiled into a RoutingTable by routing.config.runtime.

Checks that involve one row live in ``clean()``; checks across rows (targets that must exist, cycles,
names unique across models, virtual models and tier aliases) live in ``routing.config.graph_check`` so that the
admin and the config loader give the same messages.
"""

from __future__ import annotations

import hashlib
import re
import secrets

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from routing.config.provider_cloud import CLOUD_FIELDS, cloud_problems, default_base_url
from routing.config.provider_egress import egress_problems
from routing.config.provider_keys import variable_refusal
from routing.config.webhook_url import webhook_url_problem
from routing.core.cache import SCOPES as CACHE_SCOPES
from routing.core.categories import CATEGORIES, KEYWORD_CATEGORIES, strength_tag_problem
from routing.core.embeddings import embedding_field_problems
from routing.core.key_references import reference_variable
from routing.core.limits import BUDGET_PERIODS
from routing.core.policies import POLICY_STRATEGIES
from routing.core.probes import mode_problem
from routing.core.table import CAPABILITIES, ENDPOINTS, PROVIDER_KINDS, STRATEGIES
from routing.providers.anthropic.adapter import beta_names_problem
from routing.providers.openai.presets import PRESETS
from routing.schema.engine import schema_problems

NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,199}$")
MODALITIES = ("text", "image", "audio", "file")
FINISH_REASONS = ("stop", "length", "tool_calls", "content_filter")

PROVIDER_KIND_LABELS = {
    "openai": "OpenAI, or any OpenAI-compatible server without a preset",
    "azure_openai": "Azure OpenAI",
    "anthropic": "Anthropic",
    "gemini": "Google Gemini",
    "cohere": "Cohere (Chat v2)",
    "bedrock": "Amazon Bedrock (Converse)",
    "vertex": "Google Vertex AI (Gemini models)",
    "vertex_anthropic": "Google Vertex AI (Anthropic models)",
    **{kind: f"{preset.label} (OpenAI-compatible preset)" for kind, preset in PRESETS.items()},
}


def env_reference_name(reference: str) -> str | None:
    """The environment variable a key reference names (``${OPENAI_API_KEY}`` -> ``OPENAI_API_KEY``)."""
    return reference_variable(reference)


def validate_name(value: str) -> None:
    if not NAME_PATTERN.match(value):
        raise ValidationError(
            "Use 1-200 letters, digits and . _ : / @ + - (starting with a letter or digit).", code="invalid_value"
        )


def validate_webhook_url(value: str) -> None:
    problem = webhook_url_problem(value)
    if problem:
        raise ValidationError(f"The budget alert webhook URL {problem}.", code="invalid_value")


def validate_env_reference(value: str) -> None:
    """A reference to a variable that may hold a provider key: never one of the gateway's own settings."""
    variable = env_reference_name(value)
    if variable is None:
        raise ValidationError(
            "Enter a reference to an environment variable such as ${OPENAI_API_KEY}; "
            "raw keys are never stored in the database.",
            code="not_a_reference",
        )
    refusal = variable_refusal(variable)
    if refusal is not None:
        raise ValidationError(f"{refusal}.", code="refused_variable")


def _check_list_of(value: object, allowed: tuple[str, ...], what: str) -> None:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValidationError(f"Expected a list of {what}.", code="invalid_value")
    unknown = [v for v in value if v not in allowed]
    if unknown:
        raise ValidationError(
            f"Unknown {what}: {', '.join(unknown)}. Choose from {', '.join(allowed)}.", code="invalid_value"
        )


def validate_capabilities(value: object) -> None:
    _check_list_of(value, CAPABILITIES, "capabilities")


def validate_modalities(value: object) -> None:
    _check_list_of(value, MODALITIES, "modalities")


def validate_strengths(value: object) -> None:
    """A list of strength tags: letters, digits, - and _ (the categories are the well-known ones)."""
    if not isinstance(value, list):
        raise ValidationError("Expected a list of strength tags.", code="invalid_value")
    for tag in value:
        problem = strength_tag_problem(tag)
        if problem is not None:
            raise ValidationError(problem[0].upper() + problem[1:] + ".", code="invalid_value")


def validate_strength_tag(value: str) -> None:
    problem = strength_tag_problem(value)
    if problem is not None:
        raise ValidationError(problem[0].upper() + problem[1:] + ".", code="invalid_value")


def validate_endpoints(value: object) -> None:
    _check_list_of(value, ENDPOINTS, "endpoints")


def default_endpoints() -> list[str]:
    return ["chat"]


def validate_category_keywords(value: object) -> None:
    """``{category: [keyword, ...]}`` for the categories decided by keywords; each list replaces the built-in one."""
    if value in (None, {}):
        return
    if not isinstance(value, dict):
        raise ValidationError(
            f"Expected a mapping of category -> list of keywords ({', '.join(KEYWORD_CATEGORIES)}).",
            code="invalid_value")
    unknown = [str(k) for k in value if k not in KEYWORD_CATEGORIES]
    if unknown:
        raise ValidationError(f"Unknown keyword categories: {', '.join(unknown)}. Choose from "
                              f"{', '.join(KEYWORD_CATEGORIES)} (vision, long_context and general are not decided by "
                              f"keywords).", code="invalid_value")
    for category, keywords in value.items():
        if not isinstance(keywords, list) or not keywords or not all(
                isinstance(k, str) and k.strip().strip("*").strip() for k in keywords):
            raise ValidationError(f"The keywords of {category} must be a non-empty list of non-empty strings.",
                                  code="invalid_value")


def validate_string_list(value: object) -> None:
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise ValidationError("Expected a list of non-empty names.", code="invalid_value")


def validate_beta_names(value: object) -> None:
    problem = beta_names_problem(value)
    if problem is not None:
        raise ValidationError(f"{problem[0].upper()}{problem[1:]}.", code="invalid_value")


def validate_json_schema(value: object) -> None:
    """A JSON schema the gateway can evaluate (draft 2020-12 unless the schema says otherwise).

    The same check as a client's schema gets, so a contract the admin accepts is one the gateway runs:
    among others, every ``pattern`` must compile on RE2 (no backreferences or lookaround).
    """
    if value in (None, {}):
        return
    if not isinstance(value, dict):
        raise ValidationError("A JSON schema must be an object.", code="invalid_value")
    problems = schema_problems(value)
    if problems:
        raise ValidationError(f"Invalid JSON schema: {problems[0]}", code="invalid_value")


class Provider(models.Model):
    name = models.CharField(max_length=100, unique=True, validators=[validate_name])
    kind = models.CharField(max_length=20, choices=[(k, PROVIDER_KIND_LABELS[k]) for k in PROVIDER_KINDS])
    base_url = models.URLField(
        max_length=500, blank=True,
        help_text="e.g. https://api.openai.com/v1, https://api.anthropic.com, "
        "https://generativelanguage.googleapis.com, https://NAME.openai.azure.com, https://api.cohere.com. "
        "Empty for a preset kind (Mistral, Groq, ... LM Studio), Bedrock or Vertex AI: its default URL is filled in.",
    )
    api_version = models.CharField(max_length=40, blank=True, help_text="Azure OpenAI only, e.g. 2024-10-21.")
    timeout_seconds = models.PositiveIntegerField(
        default=600, validators=[MinValueValidator(1)], help_text="Upper bound for one upstream attempt."
    )
    proxy = models.CharField(
        max_length=500, blank=True,
        help_text="Empty: HTTPS_PROXY / HTTP_PROXY / NO_PROXY from the environment. direct: never through a proxy. "
        "Or this provider's own proxy, http://host:port (no credentials: put those in the environment).",
    )
    ca_bundle = models.CharField(
        max_length=500, blank=True,
        help_text="Absolute path of a PEM file of the CAs to trust for this provider, instead of the system store.",
    )
    client_cert = models.CharField(
        max_length=500, blank=True,
        help_text="Absolute path of a PEM client certificate (chain) for mutual TLS.",
    )
    client_key = models.CharField(
        max_length=500, blank=True,
        help_text="Absolute path of the client certificate's unencrypted PEM key; empty when the certificate file "
        "holds it.",
    )
    region = models.CharField(
        max_length=40, blank=True,
        help_text="Amazon Bedrock: the AWS region, e.g. us-east-1. Vertex AI: the location, e.g. us-central1 or "
        "global. The base URL may stay empty: the region's public endpoint is filled in.",
    )
    project = models.CharField(max_length=40, blank=True, help_text="Vertex AI only: the Google Cloud project id.")
    credentials_file = models.CharField(
        max_length=500, blank=True,
        help_text="Vertex AI only: absolute path of a service-account JSON key; empty: Application Default "
        "Credentials (GOOGLE_APPLICATION_CREDENTIALS, the metadata server).",
    )
    aws_access_key_id = models.CharField(
        max_length=200, blank=True,
        help_text="Amazon Bedrock only: a reference such as ${BEDROCK_ACCESS_KEY_ID}. Empty, with no API key "
        "either: the AWS credential chain (environment, AWS_PROFILE, container and instance roles).",
    )
    aws_secret_access_key = models.CharField(
        max_length=200, blank=True,
        help_text="Amazon Bedrock only: a reference such as ${BEDROCK_AWS_SECRET} (names ending in _SECRET_ACCESS_KEY "
        "are kept for the gateway's own infrastructure).",
    )
    aws_session_token = models.CharField(
        max_length=200, blank=True, help_text="Amazon Bedrock only, optional: a reference to a session token."
    )
    probe = models.CharField(
        max_length=16, blank=True, default="",
        choices=[("", "automatic"), ("models", "models"), ("completion", "completion"), ("off", "off")],
        help_text="How the background prober proves a cooling or locked-out target: models (the provider's model "
        "list or lookup; free), completion (a one-token completion, billed), off. Automatic: models, except for "
        "Azure OpenAI (completion).",
    )
    allowed_betas = models.JSONField(
        default=list, blank=True, validators=[validate_beta_names],
        help_text='Anthropic and Vertex AI Claude only: the betas an Anthropic client\'s anthropic-beta header may '
        'switch on here, e.g. ["prompt-caching-2024-07-31"] (a beta can change the price). Any other is dropped '
        "and named in the answer's X-GoModel-Dropped-Betas header. Empty: none is sent.",
    )
    enabled = models.BooleanField(default=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        cloud = cloud_problems(self.kind, {name: getattr(self, name) for name in CLOUD_FIELDS})
        if cloud:
            raise ValidationError(cloud)
        if not self.base_url:
            self.base_url = default_base_url(self.kind, self.region)
        if not self.base_url:
            preset = PRESETS.get(self.kind)
            if preset is None:
                raise ValidationError({"base_url": f"A {self.kind} provider needs a base URL."})
            self.base_url = preset.base_url
        if self.kind == "azure_openai" and not self.api_version:
            raise ValidationError({"api_version": "Azure OpenAI needs an api-version, e.g. 2024-10-21."})
        problems = egress_problems(proxy=self.proxy, ca_bundle=self.ca_bundle, client_cert=self.client_cert,
                                   client_key=self.client_key)
        probe = mode_problem(self.kind, self.probe)
        if probe is not None:
            problems["probe"] = probe
        if problems:
            raise ValidationError(problems)


class ProviderKey(models.Model):
    """One API key of a provider, as a reference to an environment variable resolved at run time."""

    provider = models.ForeignKey(Provider, on_delete=models.CASCADE, related_name="keys")
    reference = models.CharField(
        max_length=200,
        validators=[validate_env_reference],
        help_text="An environment variable reference such as ${OPENAI_API_KEY} (also os.environ/OPENAI_API_KEY).",
    )
    position = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["provider", "position", "id"]
        constraints = [models.UniqueConstraint(fields=["provider", "reference"], name="unique_key_reference")]

    def __str__(self) -> str:
        return self.reference


class ProviderModel(models.Model):
    """A concrete model on one provider; clients call it by its public name."""

    provider = models.ForeignKey(Provider, on_delete=models.PROTECT, related_name="models")
    upstream = models.CharField(max_length=200, help_text="The model name the provider knows, e.g. gpt-4o-mini.")
    name = models.CharField(
        max_length=200,
        unique=True,
        blank=True,
        validators=[validate_name],
        help_text="Public name; defaults to provider/upstream.",
    )
    input_price = models.DecimalField(
        max_digits=12, decimal_places=6, null=True, blank=True, validators=[MinValueValidator(0)],
        help_text="USD per 1M input tokens.",
    )
    output_price = models.DecimalField(
        max_digits=12, decimal_places=6, null=True, blank=True, validators=[MinValueValidator(0)],
        help_text="USD per 1M output tokens.",
    )
    cached_input_price = models.DecimalField(
        max_digits=12, decimal_places=6, null=True, blank=True, validators=[MinValueValidator(0)],
        help_text="USD per 1M cached input tokens; the input price when empty.",
    )
    prices_as_of = models.DateField(
        null=True, blank=True, verbose_name="prices as of",
        help_text="The day these prices were read: the price catalogue's date when they were filled from it, today "
                  "when a price is typed. Empty: unknown. A model whose prices are older than the catalogue's, and "
                  "differ from them, is flagged in the model list.",
    )
    context_window = models.PositiveIntegerField(null=True, blank=True, validators=[MinValueValidator(1)])
    max_output_tokens = models.PositiveIntegerField(null=True, blank=True, validators=[MinValueValidator(1)])
    capabilities = models.JSONField(default=list, blank=True, validators=[validate_capabilities])
    model_class = models.CharField(
        max_length=60, default="general", help_text="A label contracts can require, e.g. document-extraction."
    )
    rpm = models.PositiveIntegerField(
        null=True, blank=True, validators=[MinValueValidator(1)], verbose_name="provider RPM",
        help_text="The provider's requests-per-minute limit for this account; at it the target is skipped "
                  "(like a cooling one) until the last 60 seconds have room. Empty: no limit.",
    )
    tpm = models.PositiveIntegerField(
        null=True, blank=True, validators=[MinValueValidator(1)], verbose_name="provider TPM",
        help_text="The provider's tokens-per-minute limit for this account (input + output tokens of real "
                  "answers); at it the target is skipped until the last 60 seconds have room. Empty: no limit.",
    )
    strengths = models.JSONField(
        default=list, blank=True, validators=[validate_strengths],
        help_text="Tags for what the model is good at: the content categories (code, writing, analysis, math, "
                  "vision, long_context, general) or any other (reasoning, fast, ...; letters, digits, - and _). "
                  "Shown in /v1/models; routing policies select by them.",
    )
    endpoints = models.JSONField(
        default=default_endpoints, blank=True, validators=[validate_endpoints],
        help_text="What the model serves: chat (chat completions and messages) or embeddings. Empty: chat.",
    )
    dimensions = models.PositiveIntegerField(
        null=True, blank=True, validators=[MinValueValidator(1)],
        help_text="An embedding model's vector size (required with the embeddings endpoint).",
    )
    family = models.CharField(
        max_length=100, blank=True,
        help_text="An embedding model's family, e.g. text-embedding-3 (required with the embeddings endpoint): "
                  "an embeddings virtual model falls back only between models of one family and size.",
    )
    enabled = models.BooleanField(default=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        verbose_name = "model"

    def __str__(self) -> str:
        return self.name

    def save(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        if not self.name and self.provider_id:
            self.name = f"{self.provider.name}/{self.upstream}"
        super().save(*args, **kwargs)

    def clean(self) -> None:
        if not self.name and self.provider_id and self.upstream:
            self.name = f"{self.provider.name}/{self.upstream}"
        if not self.capabilities:
            self.capabilities = ["text"]
        if not self.endpoints:
            self.endpoints = ["chat"]
        problems = embedding_field_problems(self.endpoints, self.dimensions, self.family)
        if problems:
            raise ValidationError(problems)


class Contract(models.Model):
    """What an answer for one workload must satisfy. The version increases on every change."""

    workload = models.CharField(max_length=100, unique=True, validators=[validate_name])
    version = models.PositiveIntegerField(default=1, editable=False)
    modalities = models.JSONField(default=list, blank=True, validators=[validate_modalities])
    max_input_tokens = models.PositiveIntegerField(null=True, blank=True, validators=[MinValueValidator(1)])
    requires_tools = models.BooleanField(default=False)
    structured_output_required = models.BooleanField(default=False)
    schema = models.JSONField(null=True, blank=True, validators=[validate_json_schema])
    strict = models.BooleanField(default=False, help_text="Reject answers with properties the schema does not list.")
    allowed_model_classes = models.JSONField(default=list, blank=True, validators=[validate_string_list])
    max_cost_usd = models.DecimalField(
        max_digits=12, decimal_places=6, null=True, blank=True, validators=[MinValueValidator(0)]
    )
    deadline_ms = models.PositiveIntegerField(null=True, blank=True, validators=[MinValueValidator(100)])
    required_finish_reason = models.CharField(
        max_length=20, blank=True, choices=[("", "any")] + [(r, r) for r in FINISH_REASONS]
    )
    min_output_chars = models.PositiveIntegerField(null=True, blank=True)
    validator = models.CharField(
        max_length=200, blank=True, help_text="Dotted path of a Python callable(answer) -> error message or None."
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["workload"]

    def __str__(self) -> str:
        return self.workload

    def clean(self) -> None:
        if self.structured_output_required and not self.schema:
            raise ValidationError({"schema": "Structured output is required, so a JSON schema is needed."})
        if self.validator:
            from routing.config.answer_checks import resolve_validator

            try:
                resolve_validator(self.validator)
            except ValueError as exc:
                raise ValidationError({"validator": str(exc)}) from None


class VirtualModel(models.Model):
    source = models.CharField(max_length=200, unique=True, validators=[validate_name])
    strategy = models.CharField(max_length=20, choices=[(s, s) for s in STRATEGIES], default="adaptive")
    session_affinity = models.BooleanField(
        default=True, help_text="Keep a session on the target that served it while that target is healthy."
    )
    contract = models.ForeignKey(Contract, null=True, blank=True, on_delete=models.SET_NULL)
    enabled = models.BooleanField(default=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["source"]

    def __str__(self) -> str:
        return self.source


class VirtualModelTarget(models.Model):
    virtual_model = models.ForeignKey(VirtualModel, on_delete=models.CASCADE, related_name="targets")
    position = models.PositiveIntegerField(default=0)
    target = models.CharField(max_length=200, help_text="A model's public name or another virtual model.")
    weight = models.FloatField(default=1.0)

    class Meta:
        ordering = ["virtual_model", "position", "id"]
        constraints = [
            models.UniqueConstraint(fields=["virtual_model", "target"], name="unique_virtual_target"),
        ]

    def __str__(self) -> str:
        return f"{self.virtual_model_id} -> {self.target}"

    def clean(self) -> None:
        if self.weight is None or not (self.weight > 0) or self.weight != self.weight:
            raise ValidationError({"weight": "The weight must be greater than 0."})


class TierRoute(models.Model):
    alias = models.CharField(max_length=200, unique=True, validators=[validate_name])
    easy = models.CharField(max_length=200, help_text="Target for easy requests (a model or virtual model).")
    hard = models.CharField(max_length=200, help_text="Target for hard requests (a model or virtual model).")
    contract = models.ForeignKey(Contract, null=True, blank=True, on_delete=models.SET_NULL)
    enabled = models.BooleanField(default=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["alias"]

    def __str__(self) -> str:
        return self.alias


_CATEGORY_TARGET_HELP = "Target for {} requests (a model, virtual model or tier alias); empty: the default."


class CategoryRoute(models.Model):
    """An alias whose target depends on the request's content category (routing.core.categories).

    One column per category keeps the admin form plain and each error next to its field; an empty one falls
    back to ``default_target``. Targets are checked across rows in ``routing.config.graph_check``.
    """

    alias = models.CharField(max_length=200, unique=True, validators=[validate_name])
    code = models.CharField(max_length=200, blank=True, help_text=_CATEGORY_TARGET_HELP.format("code"))
    writing = models.CharField(max_length=200, blank=True, help_text=_CATEGORY_TARGET_HELP.format("writing"))
    analysis = models.CharField(max_length=200, blank=True, help_text=_CATEGORY_TARGET_HELP.format("analysis"))
    math = models.CharField(max_length=200, blank=True, help_text=_CATEGORY_TARGET_HELP.format("math"))
    vision = models.CharField(max_length=200, blank=True, help_text=_CATEGORY_TARGET_HELP.format("vision (image)"))
    long_context = models.CharField(max_length=200, blank=True,
                                    help_text=_CATEGORY_TARGET_HELP.format("long-context"))
    general = models.CharField(max_length=200, blank=True, help_text=_CATEGORY_TARGET_HELP.format("general"))
    default_target = models.CharField(
        max_length=200, verbose_name="default",
        help_text="Target for every category left empty (a model, virtual model or tier alias).",
    )
    contract = models.ForeignKey(Contract, null=True, blank=True, on_delete=models.SET_NULL)
    enabled = models.BooleanField(default=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["alias"]

    def __str__(self) -> str:
        return self.alias

    def category_targets(self) -> dict[str, str]:
        """The categories given a target of their own: ``{category: target}`` in CATEGORIES order."""
        return {category: getattr(self, category) for category in CATEGORIES if getattr(self, category)}


class RoutingPolicy(models.Model):
    """A named routing policy (routing.core.policies): a strategy, constraints, and the policy to fall back to.

    ``fallback_to`` is a reference to another policy: deleting a policy another one falls back to is refused
    (RESTRICT) unless both go together; chains are checked for cycles across rows in the admin form and the
    config loader (routing.core.policies.policy_problems).
    """

    name = models.CharField(max_length=200, unique=True, validators=[validate_name],
                            help_text='Clients select it with X-Routing-Policy; "default" applies to requests '
                                      "that name none.")
    strategy = models.CharField(
        max_length=16, choices=[(s, s) for s in POLICY_STRATEGIES], default="priority",
        help_text="priority: the virtual model's declared order; strength: the virtual model's own strategy among "
                  "targets with the strength; cost: cheapest estimated cost first; latency: fastest first.",
    )
    strength = models.CharField(
        max_length=32, blank=True, validators=[validate_strength_tag],
        help_text="Only targets whose strengths include it (required by the strength strategy): a category or a "
                  "tag some model carries. Empty: any.",
    )
    max_latency_ms = models.PositiveIntegerField(
        null=True, blank=True, validators=[MinValueValidator(1)],
        help_text="Only targets whose latency estimate is at most this (never-measured targets qualify).",
    )
    max_cost_usd = models.FloatField(
        null=True, blank=True,
        help_text="Only targets whose estimated cost for the request is at most this, in USD (unpriced targets "
                  "qualify).",
    )
    fallback_to = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.RESTRICT, related_name="fallen_back_from",
        help_text="The policy to use when no target meets this one's constraints (a chain; no cycles).",
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        verbose_name_plural = "routing policies"

    def __str__(self) -> str:
        return self.name

    # Field checks across policies (strength strategy needs a strength, cost > 0, no cycles) are in
    # routing.core.policies.policy_problems, shared by the admin form and the config file.
    def as_fields(self) -> dict[str, object]:
        """The policy as the checks and the config file read it (only the fields that are set)."""
        out: dict[str, object] = {"strategy": self.strategy}
        if self.strength:
            out["strength"] = self.strength
        if self.max_latency_ms is not None:
            out["max_latency_ms"] = self.max_latency_ms
        if self.max_cost_usd is not None:
            out["max_cost_usd"] = self.max_cost_usd
        if self.fallback_to_id is not None:
            out["fallback_to"] = self.fallback_to.name if self.fallback_to else None
        return out


def hash_secret(secret: str) -> str:
    """The stored form of a gateway key. Keys are 256-bit random, so a plain SHA-256 is enough."""
    return hashlib.sha256(secret.encode()).hexdigest()


def new_gateway_secret() -> str:
    return "gm-" + secrets.token_urlsafe(32)


class LimitFields(models.Model):
    """Limits a key or a team carries; an empty field is no limit (docs/governance.md)."""

    rpm = models.PositiveIntegerField(
        null=True, blank=True, validators=[MinValueValidator(1)], verbose_name="requests per minute",
        help_text="At most this many requests in any 60 seconds (all of them may arrive at once).",
    )
    tpm = models.PositiveIntegerField(
        null=True, blank=True, validators=[MinValueValidator(1)], verbose_name="tokens per minute",
        help_text="Requests are admitted while the answers of the last 60 seconds used fewer tokens than this.",
    )
    max_concurrency = models.PositiveIntegerField(
        null=True, blank=True, validators=[MinValueValidator(1)],
        help_text="Requests in flight at once (held until the answer, or the stream, ends).",
    )
    budget_usd = models.DecimalField(
        max_digits=12, decimal_places=6, null=True, blank=True, validators=[MinValueValidator(0)],
        verbose_name="budget (USD)", help_text="Requests are admitted while the period's spend is below this.",
    )
    budget_period = models.CharField(
        max_length=5, choices=[(p, p) for p in BUDGET_PERIODS], default="month",
        help_text="The budget's period in UTC: day, week (from Monday), month, or total (never resets).",
    )

    class Meta:
        abstract = True


class Team(LimitFields):
    """Keys of one team share its limits and budget on top of their own."""

    name = models.CharField(max_length=100, unique=True, validators=[validate_name])
    allowed_models = models.JSONField(
        default=list, blank=True, validators=[validate_string_list],
        help_text="Empty: every model. A key of the team may call only models on this list (and on its own).",
    )
    alert_webhook_url = models.CharField(
        max_length=2000, blank=True, default="", validators=[validate_webhook_url],
        verbose_name="budget alert webhook URL",
        help_text="Where the budget alerts of the team and its keys are posted (http or https, signed with "
                  "GOMODEL_BUDGET_ALERT_SECRET); empty: GOMODEL_BUDGET_ALERT_WEBHOOK_URL, if set.",
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class GatewayKey(LimitFields):
    name = models.CharField(max_length=100, unique=True)
    prefix = models.CharField(max_length=12, editable=False, help_text="The first characters, to recognise a key.")
    secret_hash = models.CharField(max_length=64, unique=True, editable=False)
    team = models.ForeignKey(Team, null=True, blank=True, on_delete=models.PROTECT, related_name="keys",
                             help_text="The key's requests must also fit the team's limits and models.")
    allowed_models = models.JSONField(
        default=list, blank=True, validators=[validate_string_list], help_text="Empty: every model."
    )
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        team = self.team if self.team_id else None
        if team is not None and team.allowed_models and isinstance(self.allowed_models, list) and self.allowed_models:
            outside = [name for name in self.allowed_models if name not in team.allowed_models]
            if outside:
                raise ValidationError({"allowed_models": f"Not allowed for the team {team.name}: "
                                                         f"{', '.join(outside)} (its models: "
                                                         f"{', '.join(team.allowed_models)})."})

    def set_new_secret(self) -> str:
        """Generate a secret, keep its hash, and return it (the only time it is ever visible)."""
        secret = new_gateway_secret()
        self.secret_hash = hash_secret(secret)
        self.prefix = secret[:10]
        return secret


class RoutingSettings(models.Model):
    """Admin overrides of the PRO_* settings. An empty field means: use the environment's value."""

    smart_routing_enabled = models.BooleanField(null=True, blank=True)
    smart_routing_threshold = models.PositiveIntegerField(null=True, blank=True)
    smart_routing_session_ttl_seconds = models.PositiveIntegerField(null=True, blank=True)
    smart_routing_keywords = models.JSONField(
        null=True, blank=True, validators=[validate_string_list], help_text="Replaces the built-in keyword list."
    )
    category_keywords = models.JSONField(
        null=True, blank=True, validators=[validate_category_keywords],
        help_text='Content-category keywords, e.g. {"code": ["refactor*", "代码"]}: each category given replaces its '
                  "built-in list (code, math, analysis, writing); the others keep theirs.",
    )
    category_long_context_tokens = models.PositiveIntegerField(
        null=True, blank=True,
        help_text="Estimated input tokens from which a request's category is long_context (default 32000).",
    )
    routing_enabled = models.BooleanField(null=True, blank=True)
    routing_objective = models.CharField(
        max_length=10, blank=True, choices=[("", "environment"), ("balanced", "balanced"), ("latency", "latency"),
                                            ("cost", "cost")]
    )
    min_weight_fraction = models.FloatField(null=True, blank=True)
    cooldown_base_seconds = models.FloatField(null=True, blank=True)
    cooldown_max_seconds = models.FloatField(null=True, blank=True)
    warm_cache_weight = models.FloatField(null=True, blank=True)
    warm_cache_ttl_seconds = models.FloatField(null=True, blank=True)
    exploration = models.FloatField(
        null=True, blank=True,
        help_text="Share (0-0.5) of each adaptive virtual model's picks drawn uniformly among its healthy targets.",
    )
    cold_start_observations = models.PositiveIntegerField(
        null=True, blank=True,
        help_text="Latency samples a target needs before its own estimate counts; until then it counts as the "
                  "fastest (0: no cold-start bonus).",
    )
    probe_interval_seconds = models.FloatField(
        null=True, blank=True,
        help_text="How often a target cooling for 5xx or network failures, or locked out for 401/403/404, is probed "
                  "in the background (0: never; at least 0.1 otherwise).",
    )

    class Meta:
        verbose_name = "routing settings"
        verbose_name_plural = "routing settings"

    def __str__(self) -> str:
        return "Routing settings"

    def clean(self) -> None:
        errors: dict[str, str] = {}
        if self.smart_routing_threshold is not None and not 1 <= self.smart_routing_threshold <= 100:
            errors["smart_routing_threshold"] = "The threshold must be between 1 and 100."
        if self.category_long_context_tokens is not None and not 1 <= self.category_long_context_tokens <= 10_000_000:
            errors["category_long_context_tokens"] = "The long-context threshold must be between 1 and 10000000 tokens."
        if self.smart_routing_session_ttl_seconds is not None and self.smart_routing_session_ttl_seconds < 1:
            errors["smart_routing_session_ttl_seconds"] = "The session TTL must be at least 1 second."
        if self.min_weight_fraction is not None and not 0 <= self.min_weight_fraction <= 0.5:
            errors["min_weight_fraction"] = "The minimum weight fraction must be between 0 and 0.5."
        for field in ("cooldown_base_seconds", "cooldown_max_seconds", "warm_cache_ttl_seconds"):
            value = getattr(self, field)
            if value is not None and not value >= 0:
                errors[field] = "Must be 0 or more seconds."
        if (
            self.cooldown_base_seconds is not None
            and self.cooldown_max_seconds is not None
            and self.cooldown_max_seconds < self.cooldown_base_seconds
        ):
            errors["cooldown_max_seconds"] = "The maximum cooldown must not be shorter than the base cooldown."
        if self.warm_cache_weight is not None and not 1 <= self.warm_cache_weight <= 1000:
            errors["warm_cache_weight"] = "The warm-cache weight must be between 1 and 1000."
        if self.exploration is not None and not 0 <= self.exploration <= 0.5:
            errors["exploration"] = "The exploration share must be between 0 and 0.5."
        if self.cold_start_observations is not None and not 0 <= self.cold_start_observations <= 1000:
            errors["cold_start_observations"] = "The cold-start observations must be between 0 and 1000."
        if self.probe_interval_seconds is not None and not (
            self.probe_interval_seconds == 0 or 0.1 <= self.probe_interval_seconds <= 86400
        ):
            errors["probe_interval_seconds"] = "The probe interval must be 0 (off) or between 0.1 and 86400 seconds."
        if errors:
            raise ValidationError(errors)

    @classmethod
    def load(cls) -> RoutingSettings:
        obj, _ = cls.objects.get_or_create(pk=1)
        return obj


class ConfigState(models.Model):
    """One row: the routing configuration's version. Workers poll it to hot-reload their snapshot."""

    version = models.BigIntegerField(default=0)
    changed_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "configuration version"


class ToolExecution(models.Model):
    """One side effect of a tool call, by execution key: the ledger tool executors claim before acting.

    Stored in the database (not in a worker's memory) so that every worker and every executor sees the
    same claim: a side effect is run at most once however many processes ask. An entry belongs to the
    caller that created it (``key_scope``): an execution key names one entry per gateway key.
    """

    key_scope = models.CharField(
        max_length=40, default="open",
        help_text="The id of the gateway key that created the entry, or `open` for requests served without a key.",
    )
    execution_key = models.CharField(max_length=300)
    state = models.CharField(max_length=12)
    owner = models.CharField(max_length=200)
    lease_until = models.FloatField(help_text="Unix time the current claim lapses.")
    expires_at = models.FloatField(help_text="Unix time the entry may be forgotten.", db_index=True)
    attempts = models.PositiveIntegerField(default=0)
    result = models.TextField(null=True, blank=True)
    error = models.TextField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "tool execution"
        constraints = [
            models.UniqueConstraint(fields=["key_scope", "execution_key"], name="tool_execution_key_per_scope"),
        ]

    def __str__(self) -> str:
        return f"{self.execution_key} ({self.state})"


class IdempotentOperation(models.Model):
    """A request made with an Idempotency-Key: in flight, completed (with its answer) or unknown.

    Kept in the database so that a repeat reaching another worker process, or arriving after a restart,
    still finds the first answer. Only requests that carry the header ever touch this table.
    """

    operation_id = models.CharField(max_length=80, unique=True)
    fingerprint = models.CharField(max_length=64)
    state = models.CharField(max_length=12)
    owner = models.CharField(max_length=64)
    lease_until = models.FloatField()
    expires_at = models.FloatField(db_index=True)
    answer = models.BinaryField(null=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "idempotent operation"

    def __str__(self) -> str:
        return f"{self.operation_id} ({self.state})"


class StoredResponse(models.Model):
    """A Responses API answer kept so that a later request can continue it with ``previous_response_id``.

    Holds one turn: its own input items and the answer as the items that carry it forward, with a link to the
    response it continued, so a conversation is stored once however many turns it has; continuing it reads the
    chain of links in one query (routing/clients/responses_store.py). A row written before turns were linked
    holds its whole conversation and no link. Scoped to the gateway key that created it: another key asking for
    it is told the id is unknown. A row past ``expires_at`` cannot be continued; it is deleted by the purge
    (routing/tasks.py, ``manage.py purge_responses``) once no row of its conversation can be continued either.
    """

    response_id = models.CharField(max_length=64, primary_key=True)
    key_scope = models.CharField(max_length=40)  # the creating key's id, or "open" for a caller without a key
    model = models.CharField(max_length=200)  # the name the client asked for
    instructions = models.TextField(null=True, blank=True)
    input_items = models.JSONField()
    output_items = models.JSONField()
    created_at = models.DateTimeField()
    expires_at = models.DateTimeField(db_index=True)
    # The response this turn continued; None on the first turn of a conversation.
    previous_response_id = models.CharField(max_length=64, null=True, blank=True)
    # The first turn's id, on every later turn (None on the first turn itself): the purge keeps or deletes a
    # conversation as a whole, with one indexed look-up per conversation.
    root_response_id = models.CharField(max_length=64, null=True, blank=True, db_index=True)

    class Meta:
        verbose_name = "stored response"

    def __str__(self) -> str:
        return self.response_id


class StoredResponseItem(models.Model):
    """Where one output item of a stored response is kept, so that a later request can send it back as an
    ``item_reference`` (its id) instead of the item itself.

    Every output item the client was given (``msg_``, ``rs_``, ``fc_``, the provider's own ids included) has a row,
    written with its turn; ``position`` is its place in the turn's ``output_items`` (None for an item the turn does
    not carry forward, such as reasoning text). Scoped like the turn, and deleted with it.
    """

    item_id = models.CharField(max_length=200)
    key_scope = models.CharField(max_length=40)  # the turn's, so the look-up is by (key, id) on one index
    response = models.ForeignKey(StoredResponse, on_delete=models.CASCADE, related_name="items")
    position = models.PositiveIntegerField(null=True)

    class Meta:
        verbose_name = "stored response item"
        constraints = [models.UniqueConstraint(fields=["key_scope", "item_id"], name="stored_item_per_key")]

    def __str__(self) -> str:
        return self.item_id


class ResponseCache(models.Model):
    """A ``caches`` entry (docs/cache.md): answers to requests for ``model`` are kept ``ttl_seconds`` and shared
    within ``scope``. A purge bumps ``generation``: every entry kept before then becomes unreachable."""

    model = models.CharField(max_length=200, unique=True,
                             help_text="The requested name whose answers are kept: a model, a virtual model, a tier "
                                       "or category alias.")
    ttl_seconds = models.PositiveIntegerField(default=600, validators=[MinValueValidator(1)],
                                              help_text="How long an answer is kept.")
    scope = models.CharField(
        max_length=8, choices=[(s, s) for s in CACHE_SCOPES], default="key",
        help_text="Who may be served an answer: key, the gateway key that asked; team, every key of its team (a key "
                  "in no team: its own); global, every caller.",
    )
    enabled = models.BooleanField(default=True)
    semantic_embeddings = models.CharField(
        max_length=200, blank=True,
        help_text="Semantic matching: the embeddings model (of this gateway) that embeds the latest user turn; empty: "
                  "exact repeats only.")
    semantic_threshold = models.FloatField(
        default=0.95, validators=[MinValueValidator(0.5), MaxValueValidator(1.0)],
        help_text="The cosine similarity a kept answer of the same context needs to be served (0.5 to 1).")
    generation = models.PositiveIntegerField(default=0, editable=False,
                                             help_text="Bumped by a purge (manage.py purge_cache, the admin).")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["model"]
        verbose_name = "response cache"

    def __str__(self) -> str:
        return self.model
