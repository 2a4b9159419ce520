"""Suite-wide fixtures. Services the tests need are started here when they are not running, and the Debian
packages they run (Chromium, HAProxy) are installed when the machine lacks them.

Only a run that collected a test needing them starts or installs them: ``pytest tests/core`` runs on a bare
machine.
"""

from __future__ import annotations

import pytest

from tests.machine import ensure_packages, missing_packages
from tests.services import ensure_all

# Fixtures that open a database connection (pytest-django's own; its autouse django_db_blocker does not).
_SERVICE_FIXTURES = frozenset({"db", "transactional_db", "django_db_setup", "live_server"})


def needs_services(item: pytest.Item) -> bool:
    """Whether a collected test talks to PostgreSQL, Redis or RabbitMQ."""
    if item.get_closest_marker("services") or item.get_closest_marker("django_db"):
        return True
    return bool(_SERVICE_FIXTURES.intersection(getattr(item, "fixturenames", ())))


def _test_folder(item: pytest.Item) -> str:
    parts = item.nodeid.split("/")
    return parts[1] if len(parts) > 2 and parts[0] == "tests" else ""


def pytest_collection_finish(session: pytest.Session) -> None:
    services = any(needs_services(item) for item in session.items)
    needs = {_test_folder(item) for item in session.items} | ({"services"} if services else set())
    ensure_packages(missing_packages(needs))
    if services:
        ensure_all()
