"""Suite-wide fixtures. Services the tests need are started here when they are not running."""

from __future__ import annotations

import pytest

from tests.services import ensure_all


def pytest_configure(config: pytest.Config) -> None:
    ensure_all()
