"""The ``teams:`` section: teams of gateway keys, their shared limits and the models their keys may use.

```yaml
teams:
  - {name: research, rpm: 600, tpm: 2000000, max_concurrency: 20, budget_usd: 500, budget_period: month,
     allowed_models: [normal, openai/gpt-4o-mini], alert_webhook_url: "https://hooks.example.com/gomodel"}
```

Every field but ``name`` is optional; an absent limit is no limit and ``budget_period`` defaults to ``month``.
``alert_webhook_url`` receives the budget alerts of the team and its keys (docs/governance.md#budget-alerts).
Keys join a team in the admin or with ``manage.py createkey NAME --team research``.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from routing import models as m
from routing.config.file.checks import (
    _check_duplicates,
    _check_name,
    _check_number,
    _check_unknown_keys,
    _Checker,
    _entries,
    _num,
)
from routing.config.file.schema import ConfigError
from routing.config.file.values import float_out
from routing.config.webhook_url import webhook_url_problem
from routing.core.limits import BUDGET_PERIODS, Limits
from routing.core.table import TeamSpec

SECTION = "teams"
TEAM_FIELDS = ("name", "rpm", "tpm", "max_concurrency", "budget_usd", "budget_period", "allowed_models",
               "alert_webhook_url")
_WHOLE_LIMITS = ("rpm", "tpm", "max_concurrency")


def parse_teams(chk: _Checker, data: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The section's teams in canonical form; problems are added by path."""
    teams = [parse_team(chk, path, entry) for path, entry in _entries(chk, data, SECTION)]
    _check_duplicates(chk, SECTION, [t["name"] for t in teams], "name")
    return teams


def parse_team(chk: _Checker, path: str, entry: dict[str, Any]) -> dict[str, Any]:
    """One ``teams`` entry in canonical form (defaults left out); problems are added by path.

    ``allowed_models`` names are not looked up, as a key's are not: a name that does not exist (yet) only
    ever refuses requests."""
    _check_unknown_keys(chk, path, entry, TEAM_FIELDS)
    _check_name(chk, f"{path}.name", entry.get("name"))
    for name in _WHOLE_LIMITS:
        _check_number(chk, f"{path}.{name}", entry.get(name), minimum=1, integer=True)
    _check_number(chk, f"{path}.budget_usd", entry.get("budget_usd"))
    budget = _num(entry.get("budget_usd"))
    if budget is not None and budget >= 1_000_000:
        chk.add(f"{path}.budget_usd", f"must be less than 1000000, got {entry['budget_usd']!r}")
    period = entry.get("budget_period", "month")
    if period not in BUDGET_PERIODS:
        chk.add(f"{path}.budget_period", f"expected one of {', '.join(BUDGET_PERIODS)}, got {period!r}")
    models = entry.get("allowed_models", [])
    if not isinstance(models, list) or not all(isinstance(x, str) and x.strip() for x in models):
        chk.add(f"{path}.allowed_models", f"expected a list of model names, got {models!r}")
        models = []
    webhook = entry.get("alert_webhook_url", "")
    if not isinstance(webhook, str):
        chk.add(f"{path}.alert_webhook_url", f"expected an http:// or https:// URL, got {webhook!r}")
        webhook = ""
    elif problem := webhook_url_problem(webhook.strip()):
        chk.add(f"{path}.alert_webhook_url", problem)  # never the URL itself: its path may hold a token
    team: dict[str, Any] = {"name": entry.get("name")}
    for name in _WHOLE_LIMITS:
        if entry.get(name) is not None:
            team[name] = entry[name]
    if budget is not None:
        team["budget_usd"] = int(budget) if budget.is_integer() else budget
    if period != "month":
        team["budget_period"] = period
    if models:
        team["allowed_models"] = list(dict.fromkeys(models))
    if webhook.strip():
        team["alert_webhook_url"] = webhook.strip()
    return team


def apply_teams(canonical: Mapping[str, Any], before: Mapping[str, Any], *, prune: bool) -> None:
    """Upsert the file's teams; with ``prune`` delete the others, refused while a key still belongs to one."""
    teams: list[Mapping[str, Any]] = canonical.get(SECTION, [])
    for entry in teams:
        if entry in before.get(SECTION, []):
            continue
        budget = entry.get("budget_usd")
        m.Team.objects.update_or_create(name=entry["name"], defaults={
            "rpm": entry.get("rpm"),
            "tpm": entry.get("tpm"),
            "max_concurrency": entry.get("max_concurrency"),
            "budget_usd": None if budget is None else Decimal(str(budget)),
            "budget_period": entry.get("budget_period", "month"),
            "allowed_models": entry.get("allowed_models", []),
            "alert_webhook_url": entry.get("alert_webhook_url", ""),
        })
    if prune:
        gone = m.Team.objects.exclude(name__in=[t["name"] for t in teams])
        in_use = sorted(set(m.GatewayKey.objects.filter(team__in=gone).values_list("team__name", flat=True)))
        if in_use:
            raise ConfigError([f'teams: "{name}" is not in the file but gateway keys still belong to it; move '
                               "them to another team first" for name in in_use])
        gone.delete()


def team_entries() -> list[dict[str, Any]]:
    """Every team in canonical form, in the order they were created."""
    out = []
    for team in m.Team.objects.order_by("id"):
        entry: dict[str, Any] = {"name": team.name}
        for name in _WHOLE_LIMITS:
            if getattr(team, name) is not None:
                entry[name] = getattr(team, name)
        if team.budget_usd is not None:
            budget = float(team.budget_usd)
            entry["budget_usd"] = int(budget) if budget.is_integer() else budget
        if team.budget_period != "month":
            entry["budget_period"] = team.budget_period
        if team.allowed_models:
            entry["allowed_models"] = list(team.allowed_models)
        if team.alert_webhook_url:
            entry["alert_webhook_url"] = team.alert_webhook_url
        out.append(entry)
    return out


def compile_teams() -> dict[int, TeamSpec]:
    """Every team by its row id, for the keys that belong to one."""
    return {
        row.id: TeamSpec(name=row.name, limits=compile_limits(row), allowed_models=frozenset(row.allowed_models or []))
        for row in m.Team.objects.all()
    }


def compile_limits(row: m.Team | m.GatewayKey) -> Limits:
    """A key's or team's limits as the request path counts them."""
    return Limits(rpm=row.rpm, tpm=row.tpm, max_concurrency=row.max_concurrency,
                  budget_usd=float_out(row.budget_usd), budget_period=row.budget_period or "month")
