"""The two conversations every client library holds with the gateway, and what their outcomes must show.

A **multi-turn** chat: the user gives a name, then asks for it with the first answer in the history. The
simulator echoes the latest user message, so each answer names its own question, and the second turn's upstream
request must carry the first answer's text. A **tool loop**: one ``get_weather`` tool, the model calls it (the
simulator calls a declared tool under ``tool_choice: auto`` unless the turn hands back a tool result), the client
runs it and returns its result, and the model answers in text; the upstream request of that last turn must carry
the result. The simulator refuses what each real provider refuses (a tool result that answers no call, roles out
of order, a Gemini call without its thought signature), so a client whose history the gateway mistranslated fails.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from routing.simulator.server import SimulatorServer

FIRST = "My name is Ada."
SECOND = "What is my name?"
QUESTION = "What is the weather in Oslo?"
TOOL_NAME = "get_weather"
TOOL_DESCRIPTION = "The current weather of a city"
TOOL_PARAMETERS: dict[str, Any] = {"type": "object", "properties": {"city": {"type": "string"}},
                                   "required": ["city"], "additionalProperties": False}
TOOL_RESULT = "4 C and snow"


def weather(city: str) -> str:
    """The tool every scenario declares: the same answer for any city."""
    return TOOL_RESULT


@dataclass(frozen=True)
class Kind:
    """A provider kind the gateway translates to, by the model the suite asks for."""

    name: str
    model: str  # the public name
    upstream: str  # the simulator's model

    @property
    def alias(self) -> str:
        """The slash-free alias, for clients that read a slash as a provider prefix of their own."""
        return self.model.replace("/", "--")


KINDS = [Kind("openai", "oa/oa-model", "oa-model"), Kind("anthropic", "an/an-model", "an-model"),
         Kind("gemini", "ge/ge-model", "ge-model")]


@dataclass(frozen=True)
class MultiTurn:
    first: str  # the text of each answer
    second: str


@dataclass(frozen=True)
class ToolLoop:
    calls: list[dict[str, Any]]  # the arguments of each call the client ran
    answer: str


def last_upstream_body(simulator: SimulatorServer, kind: Kind) -> str:
    """The latest request the simulator received for ``kind``, as JSON text."""
    received = simulator.received(kind.upstream)
    assert received, f"no request reached {kind.upstream}"
    return json.dumps(received[-1]["body"], ensure_ascii=False)


def assert_multi_turn(outcome: MultiTurn, simulator: SimulatorServer, kind: Kind) -> None:
    assert FIRST in outcome.first
    assert SECOND in outcome.second
    assert outcome.first != outcome.second
    assert outcome.first in last_upstream_body(simulator, kind)  # the second turn carried the first answer


def assert_tool_loop(outcome: ToolLoop, simulator: SimulatorServer, kind: Kind) -> None:
    assert len(outcome.calls) == 1, outcome.calls
    assert set(outcome.calls[0]) == {"city"}
    assert isinstance(outcome.calls[0]["city"], str)
    assert outcome.answer.startswith("Simulated answer")  # answered in text, after the tool's result
    assert TOOL_RESULT in last_upstream_body(simulator, kind)
