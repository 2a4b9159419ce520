#!/usr/bin/env python3
"""Django's command-line utility for the gateway, in a checkout (an installed package has ``gomodel``)."""

from __future__ import annotations

from gomodel_site.cli import main

if __name__ == "__main__":
    main()
