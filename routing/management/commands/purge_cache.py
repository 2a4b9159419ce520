"""``manage.py purge_cache [NAME ...] [--all]``: make the response cache's kept answers of some names (or all)
unreachable in every process and replica (docs/cache.md)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from routing.config.cache_purge import purge_caches


class Command(BaseCommand):
    help = "Purge the response cache of the named caches (the requested names of the caches section), or of all."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("names", nargs="*", help="Cached names, as in the caches section's model field.")
        parser.add_argument("--all", action="store_true", help="Purge every cache.")

    def handle(self, *args: Any, **options: Any) -> None:
        names: list[str] = options["names"]
        if bool(names) == bool(options["all"]):
            raise CommandError("name the caches to purge, or pass --all")
        try:
            purged = purge_caches(None if options["all"] else names, author="manage.py purge_cache", source="cli")
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"purged {len(purged)} cache(s): {', '.join(purged) or '-'}")
