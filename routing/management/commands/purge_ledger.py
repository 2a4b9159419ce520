"""``manage.py purge_ledger``: delete tool-execution ledger entries past their retention now (for deployments
without Celery beat)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from routing.clients.retention import purge_expired_executions


class Command(BaseCommand):
    help = ("Delete tool-execution ledger entries past GOMODEL_LEDGER_RETENTION, in batches; one still claimed is "
            "kept until its lease lapses.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--batch-size", type=int, default=1000, help="Rows deleted per statement.")

    def handle(self, *args: Any, **options: Any) -> None:
        deleted = purge_expired_executions(batch_size=max(1, options["batch_size"]))
        hours = settings.GOMODEL_LEDGER_RETENTION / 3600
        self.stdout.write(f"deleted {deleted} ledger entries past their retention ({hours:g}h)")
