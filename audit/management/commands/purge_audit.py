"""``manage.py purge_audit``: apply audit retention now (for deployments without Celery beat)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser
from django.utils import timezone

from audit.services import revisions_purge


class Command(BaseCommand):
    help = "Delete audit revisions (and their attempts) older than AUDIT_RETENTION_DAYS, in batches."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--days", type=int, default=None, help="Keep this many days instead of AUDIT_RETENTION_DAYS."
        )
        parser.add_argument("--batch-size", type=int, default=5000, help="Rows deleted per transaction.")

    def handle(self, *args: Any, **options: Any) -> None:
        days = options["days"] if options["days"] is not None else settings.AUDIT_RETENTION_DAYS
        if days < 1:
            self.stderr.write("--days must be at least 1")
            raise SystemExit(2)
        cutoff = timezone.now() - dt.timedelta(days=days)
        deleted = revisions_purge(older_than=cutoff, batch_size=max(1, options["batch_size"]))
        self.stdout.write(f"deleted {deleted} audit revisions older than {cutoff:%Y-%m-%d %H:%M} UTC")
