"""The audit trail of capability escalation, cold start and exploration: stored columns and JSON, the pin
history a session page shows."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

import pytest

from audit import tasks
from audit.models import AuditRevision
from audit.selectors import pin_history
from tests.audit.events import make_event

CAPABILITY_SIGNAL = {"name": "capability", "points": 0, "detail": "normal-easy lacks image"}


def escalated_event(**tier: Any) -> dict[str, Any]:
    event = make_event(f"req-{uuid.uuid4().hex}")
    event["tier"].update({"signals": [CAPABILITY_SIGNAL], "escalation": "capability", **tier})
    return event


@pytest.mark.django_db
def test_it_stores_a_capability_escalation_with_its_reason() -> None:
    event = escalated_event(tier="hard", escalated=True, pin_before="easy", pinned=False)
    tasks.ingest_events.run([event])
    row = AuditRevision.objects.get(request_id=event["request_id"])
    assert (row.tier, row.tier_escalated, row.tier_escalation, row.pin_before) == ("hard", True, "capability", "easy")
    assert CAPABILITY_SIGNAL in row.signals


@pytest.mark.django_db
def test_it_stores_the_cold_start_of_each_candidate_and_an_explored_pick() -> None:
    event = make_event(f"req-{uuid.uuid4().hex}")
    selection = event["selection"]
    selection.update(why="exploration: uniform draw among 2 healthy targets: openai/gpt-5", explored=True,
                     exploration=0.01, winner="openai/gpt-5")
    selection["candidates"][0].update(observations=12, cold_start=False)
    selection["candidates"][1].update(observations=1, cold_start=True)
    tasks.ingest_events.run([event])
    row = AuditRevision.objects.get(request_id=event["request_id"])
    assert row.selection_why.startswith("exploration: ")
    assert [(c["observations"], c["cold_start"]) for c in row.candidates] == [(12, False), (1, True)]


def revision(tier: str, *, escalated: bool = False, escalation: str = "", pin_before: str = "",
             signals: list[dict[str, Any]] | None = None) -> AuditRevision:
    return AuditRevision(request_id=uuid.uuid4().hex, created_at=dt.datetime.now(dt.UTC), tier=tier, score=2.0,
                         tier_escalated=escalated, tier_escalation=escalation, pin_before=pin_before,
                         signals=signals or [])


def test_the_pin_history_names_a_capability_escalation() -> None:
    history = pin_history([
        revision("easy"),
        revision("hard", escalated=True, escalation="capability", pin_before="easy", signals=[CAPABILITY_SIGNAL]),
    ])
    assert [(c.before, c.after) for c in history] == [("none", "easy"), ("easy", "hard")]
    assert history[1].why == "escalated from easy: the easy tier cannot serve the request (normal-easy lacks image)"


def test_a_request_handed_down_to_easy_leaves_the_pin_at_hard() -> None:
    history = pin_history([
        revision("easy", escalation="capability"),  # the verdict said hard; the hard tier could not serve it
        revision("hard", pin_before="hard"),
    ])
    assert [(c.before, c.after) for c in history] == [("none", "hard")]
