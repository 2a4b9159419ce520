"""manage.py loadconfig FILE: upsert a declarative routing configuration, all or nothing."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from routing.config.file.load import load_config_file
from routing.config.file.schema import ConfigError


class Command(BaseCommand):
    help = "Load a YAML routing configuration (providers, models, virtual_models, tier_routes, contracts)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file")
        parser.add_argument("--prune", action="store_true", help="Also delete entries the file does not list.")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            result = load_config_file(options["file"], author=f"loadconfig:{options['file']}", prune=options["prune"])
        except ConfigError as exc:
            raise CommandError(
                f"{options['file']} was not applied ({len(exc.problems)} problem(s)):\n  " + "\n  ".join(exc.problems)
            ) from None
        if result.changed:
            self.stdout.write(f"Applied {options['file']}: configuration version {result.version}.")
        else:
            self.stdout.write(f"{options['file']}: no changes (configuration version {result.version}).")
