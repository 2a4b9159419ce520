"""A fixture that makes the database unreachable for every connection opened while it is active.

The stores and the ledger API run each call in a worker thread that opens its own connection, from the
connection settings this fixture points at a loopback port nothing listens on: a real refused connection,
not a mock. Connections already open (the test's own) are left alone.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.db import connections

from tests.services import port_open

NOTHING_LISTENS = 1  # a privileged port no service of the suite uses


@pytest.fixture
def database_unreachable() -> Iterator[None]:
    options = connections.settings["default"]
    saved = options.get("PORT")
    assert not port_open(NOTHING_LISTENS)
    options["PORT"] = str(NOTHING_LISTENS)
    try:
        yield
    finally:
        options["PORT"] = saved
