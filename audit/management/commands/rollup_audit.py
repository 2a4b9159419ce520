"""``manage.py rollup_audit [--days N]``: recompute the dashboard's rollup from the stored revisions."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from audit.rollup import rollup_rebuild


class Command(BaseCommand):
    help = ("Recompute the audit rollup (the dashboard's per-minute and per-hour sums) from the revisions of the "
            "last N days: for revisions stored before the rollup existed. Safe to run again.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--days", type=int, default=7, help="How many days back to recompute (default 7).")

    def handle(self, *args: Any, **options: Any) -> None:
        days = options["days"]
        if days < 1:
            raise CommandError(f"--days must be at least 1, got {days}")
        since = timezone.now() - dt.timedelta(days=days)
        counted = rollup_rebuild(since=since)
        self.stdout.write(f"rolled up {counted} audit revisions since {since:%Y-%m-%d %H:00} UTC")
