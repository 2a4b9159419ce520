"""``manage.py purge_responses``: delete stored Responses API answers past their retention now (for deployments
without Celery beat)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from routing.clients.responses_store import purge_expired


class Command(BaseCommand):
    help = "Delete stored responses (previous_response_id) past GOMODEL_RESPONSES_RETENTION, in batches."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--batch-size", type=int, default=1000, help="Conversations deleted per statement.")

    def handle(self, *args: Any, **options: Any) -> None:
        deleted = purge_expired(batch_size=max(1, options["batch_size"]))
        hours = settings.GOMODEL_RESPONSES_RETENTION / 3600
        self.stdout.write(f"deleted {deleted} stored responses past their retention ({hours:g}h)")
