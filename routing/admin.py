"""The routing configuration in the Django admin.

Every save goes through the same versioning (routing.config.versioning): the admin names the author, the change
is recorded as a ConfigRevision, and every worker process reloads it within a couple of seconds.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.utils.html import format_html, format_html_join

from audit.money import usd
from audit.selectors import CacheStats, cache_stats
from routing import models as m
from routing.admin_catalogue import (
    CataloguePricesFilter,
    CatalogueUpstreamInput,
    fill_from_catalogue,
    filled_message,
    prices_as_of_cell,
    prices_date,
)
from routing.admin_pickers import (
    NameInput,
    NameListField,
    category_target_names,
    model_class_names,
    strength_names,
    target_names,
)
from routing.config import graph_check, versioning
from routing.config.cache_purge import purge_caches
from routing.config.file.caches import configured_embedders, format_ttl
from routing.core.categories import CATEGORIES, strength_tag_problem
from routing.core.embeddings import embedding_field_problems
from routing.core.names import did_you_mean
from routing.core.table import CAPABILITIES, ENDPOINTS
from routing.providers.embeddings import serves_embeddings


class VersionedAdmin(admin.ModelAdmin):
    """Wraps every write view so the version bump and revision commit with the change, naming the author."""

    def _versioned(self, request: HttpRequest, view: Any, *args: Any, **kwargs: Any) -> HttpResponse:
        author = getattr(request.user, "username", "") or "admin"
        with transaction.atomic(), versioning.config_author(author, source="admin"):
            response = view(request, *args, **kwargs)
            versioning.flush()
        return response

    def changeform_view(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        return self._versioned(request, super().changeform_view, *args, **kwargs)

    def delete_view(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        return self._versioned(request, super().delete_view, *args, **kwargs)

    def changelist_view(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if request.method == "POST":  # bulk actions and list_editable
            return self._versioned(request, super().changelist_view, *args, **kwargs)
        return super().changelist_view(request, *args, **kwargs)


def _with_suggestion(message: str, target: str, *, tier_aliases: bool = False) -> str:
    """``message`` about the unknown name ``target``, with the nearest names the field could take (models and
    virtual models, and tier aliases where the field takes one)."""
    names = graph_check.callable_names()
    if tier_aliases:
        names |= graph_check.tier_aliases()
    hint = did_you_mean(target, sorted(names))
    return f"{message.rstrip('.')}.{hint}" if hint else message


def _check_public_name(name: str, kind: str, pk: int | None) -> None:
    """Raise when ``name`` is taken by another model, virtual model or tier route: clients call all three."""
    owner = graph_check.public_name_owner(name, exclude=(kind, pk))
    if owner is not None:
        raise ValidationError(f'The name "{name}" is already used by a {owner}.')


# ----------------------------------------------------------------------------------------------------------
# Providers
# ----------------------------------------------------------------------------------------------------------


class ReferenceInput(forms.TextInput):
    """Renders only what looks like a ``${VAR}`` reference: a raw key typed by mistake is never echoed back."""

    def format_value(self, value: Any) -> str | None:
        if value and m.env_reference_name(str(value)) is None:
            return None
        return super().format_value(value)


class ProviderKeyForm(forms.ModelForm):
    class Meta:
        model = m.ProviderKey
        fields = ("reference", "position")
        widgets = {"reference": ReferenceInput(attrs={"placeholder": "${OPENAI_API_KEY}", "size": 40})}


class ProviderKeyInline(admin.TabularInline):
    model = m.ProviderKey
    form = ProviderKeyForm
    extra = 1
    fields = ("reference", "position")


class ProviderForm(forms.ModelForm):
    base_url = forms.URLField(
        assume_scheme="https", max_length=500, required=False,  # a preset kind's default is filled in by clean()
        help_text=m.Provider._meta.get_field("base_url").help_text,
    )

    class Meta:
        model = m.Provider
        fields = "__all__"


@admin.register(m.Provider)
class ProviderAdmin(VersionedAdmin):
    form = ProviderForm
    list_display = ("name", "kind", "base_url", "key_count", "enabled")
    list_filter = ("kind", "enabled")
    search_fields = ("name", "base_url")
    inlines = [ProviderKeyInline]

    @admin.display(description="keys")
    def key_count(self, obj: m.Provider) -> int:
        return obj.keys.count()


# ----------------------------------------------------------------------------------------------------------
# Models
# ----------------------------------------------------------------------------------------------------------


class StrengthTagsField(forms.CharField):
    """A model's strength tags typed as ``code, reasoning, fast`` (commas or spaces), stored as a list."""

    def prepare_value(self, value: Any) -> Any:
        return ", ".join(value) if isinstance(value, list) else value

    def to_python(self, value: Any) -> list[str]:  # type: ignore[override]
        text = super().to_python(value)
        tags = [tag for tag in text.replace(",", " ").split() if tag]
        for tag in tags:
            problem = strength_tag_problem(tag)
            if problem is not None:
                raise ValidationError(problem[0].upper() + problem[1:] + ".")
        return list(dict.fromkeys(tags))

    def has_changed(self, initial: Any, data: Any) -> bool:
        try:
            return self.to_python(data) != list(initial or [])
        except ValidationError:
            return True


class ProviderModelForm(forms.ModelForm):
    capabilities = forms.MultipleChoiceField(
        choices=[(c, c) for c in CAPABILITIES], widget=forms.CheckboxSelectMultiple, required=False,
        help_text="What the model accepts and can do; requests needing anything else are never sent to it.",
    )
    strengths = StrengthTagsField(
        required=False,
        help_text=f"Tags for what the model is good at, separated by commas: the content categories "
                  f"({', '.join(CATEGORIES)}) or any other (reasoning, fast, ...; letters, digits, - and _). "
                  f"Shown in /v1/models; routing policies select by them.",
    )
    endpoints = forms.MultipleChoiceField(
        choices=[(e, e) for e in ENDPOINTS], widget=forms.CheckboxSelectMultiple, required=False,
        help_text="What the model serves: chat (chat completions, messages) or embeddings (then set dimensions "
                  "and family). None ticked: chat.",
    )

    class Meta:
        model = m.ProviderModel
        fields = "__all__"
        widgets = {"model_class": NameInput(model_class_names, attrs={"size": 30}),
                   "upstream": CatalogueUpstreamInput()}
        help_texts = {"upstream": "The model name the provider knows, e.g. gpt-4o-mini. A model in the price "
                                  "catalogue offered as you type: with the prices left empty, its prices, limits "
                                  "and capabilities are filled from the catalogue."}

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        # Filled before the defaults below, so empty capabilities take the catalogue's rather than ["text"].
        self.catalogue_entry = fill_from_catalogue(data)
        self.instance.prices_as_of = prices_date(data, filled=self.catalogue_entry is not None,
                                                 changed=self.changed_data, current=self.instance.prices_as_of)
        provider, upstream = data.get("provider"), data.get("upstream")
        if not data.get("name") and provider and upstream:
            data["name"] = f"{provider.name}/{upstream}"
            self.instance.name = data["name"]
        if data.get("name"):
            try:
                m.validate_name(data["name"])
            except ValidationError as exc:
                raise ValidationError({"name": exc.messages}) from None
            try:
                _check_public_name(data["name"], "model", self.instance.pk)
            except ValidationError as exc:
                raise ValidationError({"name": exc.messages}) from None
        if not data.get("capabilities"):
            data["capabilities"] = ["text"]
        if not data.get("endpoints"):
            data["endpoints"] = ["chat"]
        problems = embedding_field_problems(data["endpoints"], data.get("dimensions"), data.get("family") or "")
        if "embeddings" in data["endpoints"] and provider and not serves_embeddings(provider.kind):
            problems.setdefault("endpoints", f"the provider {provider.name} ({provider.kind}) has no embeddings "
                                             "endpoint the gateway can call")
        if problems:
            raise ValidationError(problems)
        lost = graph_check.policies_losing_strength(data.get("strengths") or [], model_pk=self.instance.pk)
        if lost:
            raise ValidationError({"strengths": [
                f'The routing policy "{policy}" selects by "{tag}", which no other model carries; change the '
                f"policy first." for policy, tag in lost.items()]})
        return data


@admin.register(m.ProviderModel)
class ProviderModelAdmin(VersionedAdmin):
    form = ProviderModelForm
    list_display = ("name", "provider", "upstream", "input", "output", "prices_as_of_flag", "context_window",
                    "model_class", "strength_list", "enabled")
    list_filter = ("provider", CataloguePricesFilter, "model_class", "enabled")
    search_fields = ("name", "upstream", "provider__name")
    list_select_related = ("provider",)
    readonly_fields = ("prices_as_of",)

    def save_model(self, request: HttpRequest, obj: m.ProviderModel, form: Any, change: bool) -> None:
        super().save_model(request, obj, form, change)
        entry = getattr(form, "catalogue_entry", None)
        if entry is not None:
            messages.info(request, filled_message(entry))

    @admin.display(description="prices as of", ordering="prices_as_of")
    def prices_as_of_flag(self, obj: m.ProviderModel) -> str:
        return prices_as_of_cell(obj)

    @admin.display(description="input $/1M", ordering="input_price")
    def input(self, obj: m.ProviderModel) -> str:
        return usd(None if obj.input_price is None else float(obj.input_price))

    @admin.display(description="output $/1M", ordering="output_price")
    def output(self, obj: m.ProviderModel) -> str:
        return usd(None if obj.output_price is None else float(obj.output_price))

    @admin.display(description="strengths")
    def strength_list(self, obj: m.ProviderModel) -> str:
        return ", ".join(obj.strengths or [])


# ----------------------------------------------------------------------------------------------------------
# Virtual models
# ----------------------------------------------------------------------------------------------------------


class TargetInlineFormSet(forms.BaseInlineFormSet):
    def clean(self) -> None:
        super().clean()
        if any(self.errors):
            return
        rows = [
            f.cleaned_data for f in self.forms
            if f.cleaned_data and not f.cleaned_data.get("DELETE", False)
        ]
        if not rows:
            raise ValidationError("A virtual model needs at least one target.")
        names = [row["target"] for row in rows]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValidationError(f"Each target may appear once; repeated: {', '.join(duplicates)}.")
        source = self.instance.source
        if not source:
            return
        previous = None
        if self.instance.pk:
            previous = m.VirtualModel.objects.filter(pk=self.instance.pk).values_list("source", flat=True).first()
        problems = graph_check.graph_problems_with(source, names, previous_source=previous)
        by_target: dict[str, list[str]] = {}
        general: list[str] = []
        for problem in problems:
            if problem.source != source and source not in problem.message:
                continue
            if problem.target and problem.target in names:
                message = problem.message
                if message.startswith("unknown model"):
                    message = _with_suggestion(message, problem.target)
                by_target.setdefault(problem.target, []).append(message)
            else:
                general.append(problem.message)
        for form in self.forms:
            target = form.cleaned_data.get("target") if form.cleaned_data else None
            if target in by_target:
                form.add_error("target", by_target[target])
        if general:
            raise ValidationError(general)
        if by_target:
            raise ValidationError("Fix the targets marked below.")
        mix = graph_check.embedding_mix_problem_with(source, names, previous_source=previous)
        if mix is not None:
            raise ValidationError(f"targets: {mix[0]}: {mix[1]}")


class TargetForm(forms.ModelForm):
    class Meta:
        model = m.VirtualModelTarget
        fields = ("position", "target", "weight")
        widgets = {"target": NameInput(target_names)}


class TargetInline(admin.TabularInline):
    model = m.VirtualModelTarget
    form = TargetForm
    formset = TargetInlineFormSet
    extra = 1
    fields = ("position", "target", "weight")
    ordering = ("position",)


class VirtualModelForm(forms.ModelForm):
    class Meta:
        model = m.VirtualModel
        fields = "__all__"

    def clean_source(self) -> str:
        source: str = self.cleaned_data["source"]
        _check_public_name(source, "virtual model", self.instance.pk)
        return source


@admin.register(m.VirtualModel)
class VirtualModelAdmin(VersionedAdmin):
    form = VirtualModelForm
    list_display = ("source", "strategy", "target_list", "session_affinity", "enabled")
    list_filter = ("strategy", "enabled", "session_affinity")
    search_fields = ("source", "targets__target")
    inlines = [TargetInline]
    readonly_fields = ("live_state",)

    @admin.display(description="live target state")
    def live_state(self, obj: m.VirtualModel) -> str:
        from routing.gateway.inspection.live_state import render_live_state

        if not obj.pk:
            return "Saved virtual models show their targets' state here."
        # The table scrolls inside its box (eleven columns do not fit beside the field labels at 1400 px).
        return format_html(
            '<div style="overflow-x: auto; max-width: 100%">{}</div><p class="help">The latency estimate is this '
            "process's peak-EWMA of the target's answers: a slower answer replaces it at once, faster ones pull it "
            "down with a 10 s time constant, and a failure counts as at least 1 s, so after one slow answer or a "
            "failure it stays above what the target answers in now; \"-\" before the first answer.</p>",
            render_live_state(obj.source),
        )

    @admin.display(description="targets")
    def target_list(self, obj: m.VirtualModel) -> str:
        return ", ".join(f"{t.target} ({t.weight:g})" for t in obj.targets.all())

    def get_queryset(self, request: HttpRequest) -> Any:
        return super().get_queryset(request).prefetch_related("targets")


# ----------------------------------------------------------------------------------------------------------
# Tier routes, contracts
# ----------------------------------------------------------------------------------------------------------


class TierRouteForm(forms.ModelForm):
    class Meta:
        model = m.TierRoute
        fields = "__all__"
        widgets = {"easy": NameInput(target_names), "hard": NameInput(target_names)}

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        alias = data.get("alias")
        if alias:
            try:
                _check_public_name(alias, "tier route", self.instance.pk)
            except ValidationError as exc:
                raise ValidationError({"alias": exc.messages}) from None
        known = graph_check.callable_names()
        errors = {}
        for tier in ("easy", "hard"):
            target = data.get(tier)
            if target and target not in known:
                errors[tier] = _with_suggestion(
                    f'Unknown model "{target}": use a model\'s public name or a virtual model.', target)
            elif target and target == alias:
                errors[tier] = "A tier route cannot point at itself."
        if errors:
            raise ValidationError(errors)
        return data


@admin.register(m.TierRoute)
class TierRouteAdmin(VersionedAdmin):
    form = TierRouteForm
    list_display = ("alias", "easy", "hard", "contract", "enabled")
    list_filter = ("enabled",)
    search_fields = ("alias", "easy", "hard")


class CategoryRouteForm(forms.ModelForm):
    class Meta:
        model = m.CategoryRoute
        fields = "__all__"
        widgets = {field: NameInput(category_target_names) for field in (*CATEGORIES, "default_target")}

    def clean(self) -> dict[str, Any]:
        """Each target must exist (a model, virtual model or tier alias); errors stand next to their field."""
        data = super().clean()
        alias = data.get("alias")
        if alias:
            try:
                _check_public_name(alias, "category route", self.instance.pk)
            except ValidationError as exc:
                raise ValidationError({"alias": exc.messages}) from None
        if not alias or not data.get("default_target"):
            return data
        targets = {category: data[category].strip() for category in CATEGORIES if (data.get(category) or "").strip()}
        targets["default"] = data["default_target"].strip()
        previous = None
        if self.instance.pk:
            previous = m.CategoryRoute.objects.filter(pk=self.instance.pk).values_list("alias", flat=True).first()
        problems = graph_check.category_route_problems_with(alias, targets, previous_alias=previous)
        errors: dict[str, list[str]] = {}
        for problem in problems:
            field = "default_target" if problem.key == "default" else problem.key
            message = problem.message[0].upper() + problem.message[1:] + "."
            if problem.message.startswith("unknown model") and problem.target:
                message = _with_suggestion(message, problem.target, tier_aliases=True)
            errors.setdefault(field, []).append(message)
        if errors:
            raise ValidationError(errors)
        return data


@admin.register(m.CategoryRoute)
class CategoryRouteAdmin(VersionedAdmin):
    form = CategoryRouteForm
    list_display = ("alias", "code", "writing", "analysis", "math", "vision", "long_context", "general",
                    "default_target", "enabled")
    list_filter = ("enabled",)
    search_fields = ("alias", "default_target", "code", "writing", "analysis", "math")
    fieldsets = (
        (None, {"fields": ("alias", "default_target", "contract", "enabled")}),
        ("Targets by category (empty: the default)", {"fields": CATEGORIES}),
    )


class RoutingPolicyForm(forms.ModelForm):
    class Meta:
        model = m.RoutingPolicy
        fields = "__all__"
        widgets = {"strength": NameInput(strength_names, attrs={"size": 20})}

    def clean(self) -> dict[str, Any]:
        """The fallback chain may not come back to this policy (the cycle is named next to ``fallback_to``)."""
        data = super().clean()
        name = data.get("name")
        if not name or self.errors:
            return data
        fields: dict[str, object] = {"strategy": data.get("strategy")}
        for key in ("strength", "max_latency_ms", "max_cost_usd"):
            if data.get(key) not in (None, ""):
                fields[key] = data[key]
        fallback = data.get("fallback_to")
        if fallback is not None:
            fields["fallback_to"] = fallback.name
        previous = None
        if self.instance.pk:
            previous = m.RoutingPolicy.objects.filter(pk=self.instance.pk).values_list("name", flat=True).first()
        errors: dict[str, list[str]] = {}
        for problem in graph_check.policy_problems_with(name, fields, previous_name=previous):
            errors.setdefault(problem.field, []).append(problem.message[0].upper() + problem.message[1:] + ".")
        if errors:
            raise ValidationError(errors)
        return data


@admin.register(m.RoutingPolicy)
class RoutingPolicyAdmin(VersionedAdmin):
    form = RoutingPolicyForm
    list_display = ("name", "strategy", "strength", "max_latency_ms", "max_cost_usd", "fallback_to")
    list_filter = ("strategy",)
    search_fields = ("name",)
    list_select_related = ("fallback_to",)


class ContractForm(forms.ModelForm):
    modalities = forms.MultipleChoiceField(
        choices=[(x, x) for x in m.MODALITIES], widget=forms.CheckboxSelectMultiple, required=False
    )
    allowed_model_classes = NameListField(
        label="allowed model classes", names_of=model_class_names,
        unknown='Unknown model class "{}": use the class of some model.',
        help_text="Only models of these classes may serve the workload. Empty: any class.")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["allowed_model_classes"].offer(  # type: ignore[attr-defined]
            self.instance.allowed_model_classes or [])

    class Meta:
        model = m.Contract
        fields = "__all__"


@admin.register(m.Contract)
class ContractAdmin(VersionedAdmin):
    form = ContractForm
    list_display = ("workload", "version", "structured_output_required", "requires_tools", "max_cost_usd",
                    "deadline_ms")
    list_filter = ("structured_output_required", "requires_tools")
    search_fields = ("workload",)
    readonly_fields = ("version",)

    def save_model(self, request: HttpRequest, obj: m.Contract, form: Any, change: bool) -> None:
        if change and form.has_changed():
            obj.version += 1  # a versioned contract: auditors see which version a request met
        super().save_model(request, obj, form, change)


# ----------------------------------------------------------------------------------------------------------
# Gateway keys and settings
# ----------------------------------------------------------------------------------------------------------


LIMIT_FIELDS = ("rpm", "tpm", "max_concurrency", "budget_usd", "budget_period")


class LimitsForm(forms.ModelForm):
    """A key's or team's form: the budget period may be left out (a form posted without it means month)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if "budget_period" in self.fields:
            self.fields["budget_period"].required = False

    def clean_budget_period(self) -> str:
        return str(self.cleaned_data.get("budget_period") or "month")


class TeamForm(LimitsForm):
    allowed_models = NameListField(label="allowed models", help_text=m.Team._meta.get_field("allowed_models").help_text)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["allowed_models"].offer(self.instance.allowed_models or [])  # type: ignore[attr-defined]


class GatewayKeyForm(TeamForm):
    allowed_models = NameListField(
        label="allowed models", help_text="Empty: every model (within the team's, when the key has a team).")


def _limits_summary(obj: m.Team | m.GatewayKey) -> str:
    parts = [f"{obj.rpm} rpm" if obj.rpm else "", f"{obj.tpm} tpm" if obj.tpm else "",
             f"{obj.max_concurrency} at once" if obj.max_concurrency else "",
             f"{obj.budget_usd:f}".rstrip("0").rstrip(".") + f" USD/{obj.budget_period}"
             if obj.budget_usd is not None else ""]
    return ", ".join(p for p in parts if p) or "none"


def _usage(scope_kind: str, obj: m.Team | m.GatewayKey) -> str:
    from routing.config.file.teams import compile_limits
    from routing.core.limits import LimitScope
    from routing.gateway.inspection.limit_view import render_usage

    if not obj.pk:
        return "-"
    limits = compile_limits(obj)
    ident = f"key:{obj.pk}" if scope_kind == "key" else f"team:{obj.name}"
    return render_usage(LimitScope(scope_kind, obj.name, ident, limits))


@admin.register(m.Team)
class TeamAdmin(VersionedAdmin):
    form = TeamForm
    list_display = ("name", "limits", "allowed", "updated_at")
    search_fields = ("name",)
    readonly_fields = ("usage",)
    fields = ("name", "allowed_models", *LIMIT_FIELDS, "alert_webhook_url", "usage")

    @admin.display(description="limits")
    def limits(self, obj: m.Team) -> str:
        return _limits_summary(obj)

    @admin.display(description="allowed models")
    def allowed(self, obj: m.Team) -> str:
        return ", ".join(obj.allowed_models) if obj.allowed_models else "all"

    @admin.display(description="usage and remaining budget")
    def usage(self, obj: m.Team) -> str:
        return _usage("team", obj)


@admin.register(m.GatewayKey)
class GatewayKeyAdmin(VersionedAdmin):
    form = GatewayKeyForm
    list_display = ("name", "prefix", "team", "allowed", "limits", "expires_at", "revoked", "created_at")
    list_filter = ("revoked", "team")
    search_fields = ("name", "prefix")
    readonly_fields = ("prefix", "created_at", "usage", "team_usage")
    fields = ("name", "prefix", "team", "allowed_models", *LIMIT_FIELDS, "usage", "team_usage", "expires_at",
              "revoked", "created_at")

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
        from django.conf import settings

        context = {"auth_open": settings.GOMODEL_AUTH == "open", "has_master_key": bool(settings.GOMODEL_MASTER_KEY),
                   **(extra_context or {})}
        return super().changelist_view(request, context)

    @admin.display(description="allowed models")
    def allowed(self, obj: m.GatewayKey) -> str:
        return ", ".join(obj.allowed_models) if obj.allowed_models else "all"

    @admin.display(description="limits")
    def limits(self, obj: m.GatewayKey) -> str:
        return _limits_summary(obj)

    @admin.display(description="usage and remaining budget")
    def usage(self, obj: m.GatewayKey) -> str:
        return _usage("key", obj)

    @admin.display(description="the team's usage and remaining budget")
    def team_usage(self, obj: m.GatewayKey) -> str:
        return _usage("team", obj.team) if obj.pk and obj.team is not None else "-"

    def save_model(self, request: HttpRequest, obj: m.GatewayKey, form: Any, change: bool) -> None:
        secret = None if change else obj.set_new_secret()
        super().save_model(request, obj, form, change)
        if secret:
            self.message_user(
                request,
                format_html(
                    "The key for “{}” is <code>{}</code>. Copy it now: it is stored only as a hash and "
                    "cannot be shown again.", obj.name, secret,
                ),
                level=messages.WARNING,
            )


class RoutingSettingsForm(forms.ModelForm):
    class Meta:
        model = m.RoutingSettings
        fields = "__all__"


@admin.register(m.RoutingSettings)
class RoutingSettingsAdmin(VersionedAdmin):
    form = RoutingSettingsForm
    readonly_fields = ("in_force",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return not m.RoutingSettings.objects.exists() and super().has_add_permission(request)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
        from routing.config.file.routing_settings import compile_settings

        values = compile_settings(m.RoutingSettings.objects.filter(pk=1).first())
        rows = [(f, getattr(values, f)) for f in values.__dataclass_fields__]
        return super().changelist_view(request, {"settings_in_force": rows, **(extra_context or {})})

    @admin.display(description="values in force (environment defaults with these overrides)")
    def in_force(self, obj: m.RoutingSettings) -> str:
        from routing.config.file.routing_settings import compile_settings

        values = compile_settings(obj if obj.pk else None)
        rows = format_html_join(
            "", "<tr><th>{}</th><td>{}</td></tr>", ((f, getattr(values, f)) for f in values.__dataclass_fields__)
        )
        return format_html('<div style="overflow-x: auto; max-width: 100%"><table>{}</table></div>', rows)


# ----------------------------------------------------------------------------------------------------------
# Response caches
# ----------------------------------------------------------------------------------------------------------


class ResponseCacheForm(forms.ModelForm):
    class Meta:
        model = m.ResponseCache
        fields = ("model", "ttl_seconds", "scope", "enabled", "semantic_embeddings", "semantic_threshold")

    def clean_semantic_embeddings(self) -> str:
        """Empty, or a name of this gateway that serves embeddings."""
        name = str(self.cleaned_data.get("semantic_embeddings") or "").strip()
        if name and name not in configured_embedders():
            raise ValidationError(f'"{name}" is no model of this gateway that serves embeddings (endpoints: '
                                  "embeddings), nor a virtual model of such models.")
        return name

    def clean_model(self) -> str:
        """A name clients call: a model, a virtual model, a tier or category alias (with the nearest if not)."""
        name = str(self.cleaned_data["model"]).strip()
        known = (graph_check.callable_names() | graph_check.tier_aliases()
                 | set(m.CategoryRoute.objects.values_list("alias", flat=True)))
        if name not in known:
            raise ValidationError(_with_suggestion(f'No model, virtual model or alias is named "{name}".', name,
                                                   tier_aliases=True))
        return name


@admin.register(m.ResponseCache)
class ResponseCacheAdmin(VersionedAdmin):
    form = ResponseCacheForm
    list_display = ("model", "ttl", "scope", "enabled", "hit_rate", "saved", "generation", "updated_at")
    list_filter = ("scope", "enabled")
    search_fields = ("model",)
    readonly_fields = ("generation", "last_day")
    fields = ("model", "ttl_seconds", "scope", "enabled", "semantic_embeddings", "semantic_threshold", "generation",
              "last_day")
    actions = ("purge",)

    @admin.display(description="ttl")
    def ttl(self, obj: m.ResponseCache) -> str:
        return format_ttl(obj.ttl_seconds)

    @admin.display(description="hit rate (24h)")
    def hit_rate(self, obj: m.ResponseCache) -> str:
        rate = _cache_day(obj).hit_rate
        return "-" if rate is None else f"{rate:.0%}"

    @admin.display(description="saved (24h)")
    def saved(self, obj: m.ResponseCache) -> str:
        return usd(_cache_day(obj).saved_usd)

    @admin.display(description="last 24 hours")
    def last_day(self, obj: m.ResponseCache) -> str:
        if obj.pk is None:
            return "-"
        stats = _cache_day(obj)
        return (f"{stats.hits} hits ({stats.semantic_hits} semantic), {stats.misses} misses, {stats.bypasses} "
                f"bypasses; "
                f"{usd(stats.saved_usd)} of provider spend saved")

    @admin.action(description="Purge the selected caches' kept answers")
    def purge(self, request: HttpRequest, queryset: Any) -> None:
        author = getattr(request.user, "username", "") or "admin"
        purged = purge_caches([row.model for row in queryset], author=author, source="admin")
        self.message_user(request, f"Purged {len(purged)} cache(s): {', '.join(purged)}. Every process stops serving "
                                   "their kept answers once it loads the new configuration version.",
                          messages.SUCCESS)


def _cache_day(obj: m.ResponseCache) -> CacheStats:
    return cache_stats(name=obj.model, since=timezone.now() - dt.timedelta(days=1))
