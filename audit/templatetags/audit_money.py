"""``{% load audit_money %}``: ``{{ value|usd }}`` prints money rounded (audit.money.usd)."""

from __future__ import annotations

from django import template

from audit.money import usd as _usd

register = template.Library()


@register.filter
def usd(value: float | None) -> str:
    try:
        return _usd(None if value is None or value == "" else float(value))
    except (TypeError, ValueError):
        return "-"
