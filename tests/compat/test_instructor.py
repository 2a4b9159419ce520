"""Instructor (structured extraction over the openai SDK, in its own environment: tests/compat/instructor/), in its
tool-calling mode and its JSON-schema mode: a multi-turn extraction, and its re-ask, the tool loop it runs (the
validator's refusal goes back as the tool call's result, the model calls the tool again). Instructor does not run
the caller's own tools; docs/clients.md says so."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.compat import scenario
from tests.compat.conftest import Compat
from tests.compat.instructor_env import ensure_environment, run_instructor
from tests.compat.scenario import Kind, last_upstream_body

pytestmark = pytest.mark.services

ASSISTANT = "Your name is {name}."
REFUSAL = "The name must be spelt out in full."


@pytest.fixture(scope="session")
def python() -> Path:
    return ensure_environment()


def settings(compat: Compat, kind: Kind, name: str, mode: str) -> dict[str, Any]:
    return {"openaiUrl": compat.openai_url, "key": compat.key, "model": kind.model, "scenario": name, "mode": mode,
            "first": scenario.FIRST, "second": scenario.SECOND, "question": scenario.QUESTION,
            "assistant": ASSISTANT, "refusal": REFUSAL}


@pytest.mark.parametrize("mode", ["tool_call", "json_schema_mode"])
def test_multi_turn(python: Path, compat: Compat, kind: Kind, mode: str) -> None:
    outcome = run_instructor(python, settings(compat, kind, "multi_turn", mode))
    for turn in ("first", "second"):
        assert isinstance(outcome[turn]["name"], str)
    sent = last_upstream_body(compat.simulator, kind)
    for text in (scenario.FIRST, ASSISTANT.format(name=outcome["first"]["name"]), scenario.SECOND):
        assert json.dumps(text)[1:-1] in sent  # the second turn carried the first and its answer


def test_reask_returns_the_refusal_as_the_tool_result(python: Path, compat: Compat, kind: Kind) -> None:
    outcome = run_instructor(python, settings(compat, kind, "reask", "tool_call"))
    assert len(outcome["seen"]) == 2  # refused once, accepted on the second call
    assert outcome["answer"]["name"] == outcome["seen"][1]
    assert REFUSAL in last_upstream_body(compat.simulator, kind)
