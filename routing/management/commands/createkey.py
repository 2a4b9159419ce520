"""manage.py createkey NAME [--model M ...] [--team T] [--rpm N] [--tpm N] [--max-concurrency N]
[--budget-usd X] [--budget-period day|week|month|total]: create a gateway key and print its secret once."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from routing.config import versioning
from routing.core.limits import BUDGET_PERIODS
from routing.models import GatewayKey, Team

# The model field each limit flag sets, so a validation error names the flag the operator typed.
FLAG_OF_FIELD = {
    "rpm": "--rpm", "tpm": "--tpm", "max_concurrency": "--max-concurrency", "budget_usd": "--budget-usd",
    "budget_period": "--budget-period", "team": "--team", "allowed_models": "--model", "name": "NAME",
}


def _whole(flag: str, value: str | None) -> int | None:
    if value is None:
        return None
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1 or str(number) != value.strip().lstrip("+"):
        raise CommandError(f"{flag} must be a whole number of at least 1, got {value!r}")
    return number


def _usd(value: str | None) -> Decimal | None:
    if value is None:
        return None
    try:
        amount = Decimal(value)
    except InvalidOperation:
        raise CommandError(f"--budget-usd must be an amount in USD such as 25 or 12.50, got {value!r}") from None
    if not amount.is_finite() or amount < 0:
        raise CommandError(f"--budget-usd must be 0 or more, got {value!r}")
    if amount != amount.quantize(Decimal("0.000001")) or amount >= Decimal("1000000"):
        raise CommandError(f"--budget-usd takes at most 6 decimals and less than 1,000,000 USD, got {value!r}")
    return amount


class Command(BaseCommand):
    help = "Create a gateway key. The secret is printed once; only its hash is stored."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name")
        parser.add_argument("--model", action="append", default=[], help="Allow only this model (repeatable).")
        parser.add_argument("--team", help="The team the key belongs to (its limits apply too).")
        parser.add_argument("--rpm", help="Requests per minute.")
        parser.add_argument("--tpm", help="Tokens per minute.")
        parser.add_argument("--max-concurrency", help="Requests in flight at once.")
        parser.add_argument("--budget-usd", help="Budget in USD per --budget-period.")
        parser.add_argument("--budget-period", help=f"One of {', '.join(BUDGET_PERIODS)} (default month).")

    def handle(self, *args: Any, **options: Any) -> None:
        name = options["name"]
        if GatewayKey.objects.filter(name=name).exists():
            raise CommandError(f'a key named "{name}" already exists')
        period = options["budget_period"]
        if period is not None and period not in BUDGET_PERIODS:
            raise CommandError(f"--budget-period must be one of {', '.join(BUDGET_PERIODS)}, got {period!r}")
        team = None
        if options["team"] is not None:
            team = Team.objects.filter(name=options["team"]).first()
            if team is None:
                raise CommandError(f'--team: no team named "{options["team"]}" (teams are created in the admin '
                                   "or in the config file's teams: section)")
        key = GatewayKey(
            name=name, allowed_models=options["model"], team=team,
            rpm=_whole("--rpm", options["rpm"]), tpm=_whole("--tpm", options["tpm"]),
            max_concurrency=_whole("--max-concurrency", options["max_concurrency"]),
            budget_usd=_usd(options["budget_usd"]), budget_period=period or "month",
        )
        secret = key.set_new_secret()
        try:
            key.full_clean()
        except ValidationError as exc:
            problems = [f"{FLAG_OF_FIELD.get(field, field)}: {' '.join(messages)}"
                        for field, messages in exc.message_dict.items()]
            raise CommandError("; ".join(problems)) from None
        with transaction.atomic(), versioning.config_author("createkey", source="cli"):
            key.save()
            versioning.flush()
        self.stdout.write(secret)
