"""Pickers for the admin's name fields: the configured names offered while typing, lists as multi-selects.

A field naming one model, virtual model or alias (a virtual model's target, a tier route's easy and hard, a
category route's targets, a routing policy's strength) stays a text field, with the names it may take in a
``<datalist>`` the browser offers as the operator types; leaving the field with a name not on the list puts a
note under it with the closest names (routing/static/routing/name_picker.js), and the form refuses it on save
with the nearest names (routing/admin.py). A list of names (a key's or a
team's allowed models, a contract's allowed model classes) is a two-pane multi-select of the names configured,
filtered as one types (the admin's own
``FilteredSelectMultiple``, served from this site's static files). Names come from the database, as the form's
checks read them; nothing is fetched from another host.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from django import forms
from django.contrib.admin.widgets import FilteredSelectMultiple
from django.core.exceptions import ValidationError
from django.utils.html import format_html, format_html_join

from routing import models as m
from routing.config import graph_check
from routing.core.categories import known_strengths
from routing.core.names import did_you_mean


def target_names() -> list[str]:
    """What a virtual model's target or a tier route's easy and hard may name: models and virtual models."""
    return sorted(graph_check.callable_names())


def category_target_names() -> list[str]:
    """What a category route's targets may name: models, virtual models and tier aliases."""
    return sorted(graph_check.callable_names() | graph_check.tier_aliases())


def public_names() -> list[str]:
    """Every name a client may send as ``model``: tier and category aliases, virtual models and models."""
    names = graph_check.callable_names() | graph_check.tier_aliases()
    names.update(m.CategoryRoute.objects.values_list("alias", flat=True))
    return sorted(names)


def model_class_names() -> list[str]:
    """The model classes the stored models have: what a contract's allowed model classes may name."""
    return sorted(set(m.ProviderModel.objects.exclude(model_class="").values_list("model_class", flat=True)))


def strength_names() -> list[str]:
    """The tags a routing policy may select by: the categories, then the tags models carry."""
    return list(known_strengths(graph_check.carried_strengths()))


class NameInput(forms.TextInput):
    """A text input with a ``<datalist>`` of the names ``names_of()`` returns, read each time it is drawn."""

    class Media:
        js = ("routing/name_picker.js",)  # the note under a name not on the list, before the form is saved

    def __init__(self, names_of: Callable[[], Iterable[str]], attrs: dict[str, Any] | None = None) -> None:
        super().__init__(attrs={"size": 40, "autocomplete": "off", "class": "name-picker-input", **(attrs or {})})
        self.names_of = names_of

    def render(self, name: str, value: Any, attrs: dict[str, Any] | None = None, renderer: Any = None) -> str:
        attrs = dict(attrs or {})
        # One list per input: inline rows and the empty row the admin's script clones each get their own id.
        list_id = f"{attrs.get('id') or 'id_' + name}-names"
        attrs["list"] = list_id
        field = super().render(name, value, attrs, renderer)
        options = format_html_join("", '<option value="{}"></option>', ((n,) for n in self.names_of()))
        return format_html('{}<datalist id="{}" class="name-picker">{}</datalist>', field, list_id, options)


class NameListWidget(FilteredSelectMultiple):
    """The admin's two-pane filter box, in a box of its own: its script puts the panes first in the select's
    parent, which would otherwise be the form row and push the field's label to the right."""

    def render(self, name: str, value: Any, attrs: dict[str, Any] | None = None, renderer: Any = None) -> str:
        return format_html('<div class="name-list-picker">{}</div>', super().render(name, value, attrs, renderer))


class NameListField(forms.MultipleChoiceField):
    """A list of public names picked from those configured (empty: every model, as the field says).

    The names already stored on the row stay choices (marked when nothing is configured by that name: the
    config file may name a model before it exists); any other name is refused with the nearest ones.
    """

    UNKNOWN_MODEL = "Unknown model \"{}\": use a configured model, virtual model, tier or category alias."

    def __init__(self, *, label: str, help_text: str, names_of: Callable[[], Iterable[str]] = public_names,
                 unknown: str = UNKNOWN_MODEL) -> None:
        super().__init__(required=False, label=label[:1].upper() + label[1:], help_text=help_text,
                         widget=NameListWidget(label, is_stacked=False))
        self.names_of = names_of
        self.unknown = unknown
        self.known: list[str] = []
        self.stored: list[str] = []

    def offer(self, stored: Iterable[str]) -> None:
        """Fill the choices: the configured names, then the stored ones that are not configured."""
        self.known = list(self.names_of())
        self.stored = [n for n in stored if isinstance(n, str)]
        missing = [n for n in self.stored if n not in self.known]
        self.choices = [(n, n) for n in self.known] + [(n, f"{n} (not configured)") for n in missing]

    def prepare_value(self, value: Any) -> Any:
        return list(value) if isinstance(value, (list, tuple)) else value

    def validate(self, value: Any) -> None:
        """Refuse a name neither configured nor already stored here, naming the nearest configured names."""
        if self.required and not value:
            raise ValidationError(self.error_messages["required"], code="required")
        problems = []
        for name in value:
            if name not in self.known and name not in self.stored:
                problems.append(ValidationError(self.unknown.format(name) + did_you_mean(name, self.known),
                                                code="unknown_name"))
        if problems:
            raise ValidationError(problems)

    def clean(self, value: Any) -> list[str]:
        names = super().clean(value)
        return list(dict.fromkeys(names))

    def has_changed(self, initial: Any, data: Any) -> bool:
        return list(initial or []) != list(dict.fromkeys(data or []))
