"""In-process request tests hand their audit events to a list instead of the publisher thread.

The publisher's own behaviour is tested in tests/audit; here a thread writing to the database behind the
test's back would hold a connection open past the test database's teardown. Each test package that serves
requests in process uses this fixture from its conftest.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from routing.gateway import audit_handoff


@pytest.fixture(autouse=True)
def audit_events(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[dict[str, Any]]]:
    events: list[dict[str, Any]] = []
    monkeypatch.setattr(audit_handoff, "publish_event",
                        lambda call, journey, elapsed: events.append(audit_handoff.build_event(call, journey, elapsed)))
    return events
