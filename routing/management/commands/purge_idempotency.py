"""``manage.py purge_idempotency``: delete Idempotency-Key operations past their retention now (for deployments
without Celery beat)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from routing.clients.retention import purge_expired_operations


class Command(BaseCommand):
    help = ("Delete Idempotency-Key operations (stored answers) past GOMODEL_IDEMPOTENCY_RETENTION, in batches; "
            "one still in flight is kept until its lease lapses.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--batch-size", type=int, default=1000, help="Rows deleted per statement.")

    def handle(self, *args: Any, **options: Any) -> None:
        deleted = purge_expired_operations(batch_size=max(1, options["batch_size"]))
        hours = settings.GOMODEL_IDEMPOTENCY_RETENTION / 3600
        self.stdout.write(f"deleted {deleted} idempotency records past their retention ({hours:g}h)")
