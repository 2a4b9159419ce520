"""manage.py dumpconfig [-o FILE]: write the routing configuration as declarative YAML."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from routing.config.file.dump import dump_config, dump_yaml


class Command(BaseCommand):
    help = "Write the routing configuration in the format loadconfig reads (key references, never keys)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("-o", "--output", help="Write to this file instead of standard output.")

    def handle(self, *args: Any, **options: Any) -> None:
        text = dump_yaml(dump_config())
        if options.get("output"):
            with open(options["output"], "w", encoding="utf-8") as handle:
                handle.write(text)
        else:
            self.stdout.write(text, ending="")
