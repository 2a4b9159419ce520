"""The gateway's command line: Django's management commands with the gateway's settings.

``manage.py`` in a checkout and the ``gomodel`` command of an installed package (pyproject.toml's console
script) both run ``main``: ``gomodel migrate``, ``gomodel createkey NAME``, ``gomodel demo`` and the rest work from
any folder, with the package in site-packages.
"""

from __future__ import annotations

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gomodel_site.settings")
    if sys.argv[1:2] == ["demo"]:
        # Settings are read before any command runs: the demo, and the processes it starts, may use the public
        # fallback secret key that production refuses (gomodel_site/settings.py).
        os.environ.setdefault("GOMODEL_DEMO", "true")
    try:
        from django.core.exceptions import ImproperlyConfigured
        from django.core.management import execute_from_command_line
    except ImportError as exc:
        raise SystemExit(
            "Django is not installed in this Python. Install the gateway first: "
            "python3 -m venv .venv && .venv/bin/pip install -e ."
        ) from exc
    try:
        execute_from_command_line(sys.argv)
    except ImproperlyConfigured as exc:
        # A bad environment value is the operator's mistake: say which one, without a traceback.
        raise SystemExit(f"configuration error: {exc}") from None


if __name__ == "__main__":  # python -m gomodel_site.cli
    main()
