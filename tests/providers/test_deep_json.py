"""JSON nested past the parser's depth, from a provider or inside a client's string field, is malformed input,
never an exception that escapes as a 500."""

from __future__ import annotations

import pytest

from routing.core.answer import Answer, ToolCall
from routing.core.error_classifier import parse_error_body
from routing.core.ledger import arguments_hash
from routing.core.requirements import DeclaredTool
from routing.core.validate import ValidationRules, validate_answer
from routing.providers import MalformedResponse, get_adapter
from routing.providers.base import load_json_body
from routing.providers.errors import RequestShapeError
from routing.providers.streaming.decoding import load_event_json
from routing.providers.streaming.sse import SSEEvent
from tests.providers.support import PROVIDERS, model

DEEP = "[" * 200_000 + "]" * 200_000


def test_it_reads_a_deep_upstream_body_as_malformed() -> None:
    with pytest.raises(MalformedResponse):
        load_json_body(DEEP.encode())


def test_it_reads_a_deep_stream_event_as_malformed() -> None:
    with pytest.raises(MalformedResponse):
        load_event_json(SSEEvent(event=None, data=DEEP, raw=b""))


def test_it_reads_a_deep_error_body_as_text() -> None:
    assert get_adapter("openai").parse_error(status=500, data=DEEP.encode()).message is not None
    assert parse_error_body(DEEP) is not None


def test_it_rejects_deep_structured_output_and_tool_arguments() -> None:
    rules = ValidationRules(json_required=True)
    verdict = validate_answer(Answer(text=DEEP), rules, schema_validator=lambda schema, value: [])
    assert (verdict.ok, verdict.reason) == (False, "schema")
    with pytest.raises(ValueError, match="nested too deeply"):
        arguments_hash(DEEP)
    tool_rules = ValidationRules(tools=(DeclaredTool(name="t", parameters={"type": "array"}),))
    call = ToolCall(id="c", name="t", arguments=DEEP)
    verdict = validate_answer(Answer(text="", tool_calls=(call,)), tool_rules, schema_validator=lambda s, v: [])
    assert (verdict.ok, verdict.reason) == (False, "tool_call")
    assert any("not valid JSON" in detail for detail in verdict.details)


def test_it_refuses_deep_tool_arguments_in_a_client_request_for_anthropic() -> None:
    body = {"model": "m", "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
                                              "function": {"name": "t", "arguments": DEEP}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"}]}
    for kind in ("anthropic", "gemini"):
        with pytest.raises(RequestShapeError):
            get_adapter(kind).build_request(provider=PROVIDERS[kind], model=model(kind), body=body,
                                            inbound="openai", stream=False, api_key="k")
