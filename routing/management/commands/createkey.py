"""manage.py createkey NAME [--model M ...]: create a gateway key and print its secret once."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from routing.config import versioning
from routing.models import GatewayKey


class Command(BaseCommand):
    help = "Create a gateway key. The secret is printed once; only its hash is stored."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name")
        parser.add_argument("--model", action="append", default=[], help="Allow only this model (repeatable).")

    def handle(self, *args: Any, **options: Any) -> None:
        if GatewayKey.objects.filter(name=options["name"]).exists():
            raise CommandError(f'a key named "{options["name"]}" already exists')
        key = GatewayKey(name=options["name"], allowed_models=options["model"])
        secret = key.set_new_secret()
        with transaction.atomic(), versioning.config_author("createkey", source="cli"):
            key.save()
            versioning.flush()
        self.stdout.write(secret)
