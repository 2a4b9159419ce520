"""The response cache's key and request directives (routing.core.cache): what is in the key, what is not."""

from __future__ import annotations

from typing import Any

import pytest

from routing.core.cache import (
    CacheSpec,
    Directive,
    DirectiveError,
    SemanticSpec,
    directive,
    exact_key,
    latest_user_turn,
    scope_of,
    semantic_partition,
    storable_finish,
)

SPEC = CacheSpec(name="normal", ttl_s=600)
BODY: dict[str, Any] = {
    "model": "normal", "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}],
    "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
    "tool_choice": "auto", "response_format": {"type": "json_object"}, "temperature": 0.2, "top_p": 0.9,
    "max_tokens": 100, "n": 1, "seed": 3, "stop": ["\n\n"],
}


def key(body: dict[str, Any] | None = None, **overrides: Any) -> str:
    arguments: dict[str, Any] = {"scope": "key:1", "protocol": "openai", "requested_model": "normal",
                                 "body": BODY if body is None else body, **overrides}
    spec = arguments.pop("spec", SPEC)
    return exact_key(spec, **arguments)


@pytest.mark.parametrize("field", ["stream", "stream_options", "user", "metadata", "safety_identifier",
                                   "prompt_cache_key", "store", "previous_response_id"])
def test_it_leaves_transport_fields_out_of_the_key(field: str) -> None:
    assert key({**BODY, field: {"include_usage": True} if field == "stream_options" else "x"}) == key()


@pytest.mark.parametrize(("field", "value"), [
    ("messages", [{"role": "user", "content": "hello"}]),
    ("messages", [{"role": "system", "content": "be long"}, {"role": "user", "content": "hi"}]),
    ("tools", []), ("tool_choice", "required"), ("response_format", {"type": "text"}), ("temperature", 0.3),
    ("top_p", 1), ("max_tokens", 101), ("n", 2), ("seed", 4), ("stop", None), ("logit_bias", {"1": 2}),
    ("reasoning_effort", "high"), ("system", "a system field"),
])
def test_every_field_that_shapes_the_answer_is_in_the_key(field: str, value: Any) -> None:
    assert key({**BODY, field: value}) != key()


def test_the_key_does_not_depend_on_the_order_of_fields() -> None:
    assert key(dict(reversed(list(BODY.items())))) == key()


@pytest.mark.parametrize("override", [
    {"scope": "key:2"}, {"scope": "team:squad"}, {"scope": "global"}, {"protocol": "anthropic"},
    {"protocol": "responses"}, {"requested_model": "other"}, {"workload": "invoices"}, {"betas": "some-beta"},
    {"spec": CacheSpec(name="normal", ttl_s=600, generation=1)},
])
def test_scope_protocol_name_workload_betas_and_purges_are_in_the_key(override: dict[str, Any]) -> None:
    assert key(**override) != key()


def test_the_key_is_a_sha256_hex_digest() -> None:
    digest = key()
    assert len(digest) == 64
    assert set(digest) <= set("0123456789abcdef")


@pytest.mark.parametrize(("scope", "team", "expected"), [
    ("key", "squad", "key:7"), ("team", "squad", "team:squad"), ("team", "", "key:7"), ("team", None, "key:7"),
    ("global", "squad", "global"),
])
def test_the_scope_of_a_request(scope: Any, team: str | None, expected: str) -> None:
    assert scope_of(CacheSpec(name="n", ttl_s=1, scope=scope), key_id=7, team=team) == expected


@pytest.mark.parametrize(("headers", "expected"), [
    ({}, Directive()),
    ({"x-gomodel-cache": "off"}, Directive(read=False, write=False, reason="off")),
    ({"x-gomodel-cache": " Refresh "}, Directive(read=False, write=True, reason="refresh")),
    ({"cache-control": "no-store"}, Directive(read=False, write=False, reason="no-store")),
    ({"cache-control": "max-age=0, no-cache"}, Directive(read=False, write=True, reason="no-cache")),
    ({"cache-control": "max-age=60"}, Directive()),
    ({"x-gomodel-cache": "refresh", "cache-control": "no-store"}, Directive(read=False, write=True,
                                                                            reason="refresh")),
])
def test_request_directives(headers: dict[str, str], expected: Directive) -> None:
    assert directive(headers) == expected


def test_an_unknown_cache_header_value_is_refused_naming_the_header() -> None:
    with pytest.raises(DirectiveError) as caught:
        directive({"x-gomodel-cache": "maybe"})
    assert caught.value.header == "X-GoModel-Cache"


@pytest.mark.parametrize(("finish", "allowed", "expected"), [
    ("stop", False, True), ("tool_calls", False, True), ("length", False, False), ("length", True, True),
    ("content_filter", True, False), ("unknown", True, False),
])
def test_only_complete_answers_are_storable(finish: str, allowed: bool, expected: bool) -> None:
    assert storable_finish(finish, truncation_allowed=allowed) is expected


SEMANTIC = CacheSpec(name="normal", ttl_s=600, semantic=SemanticSpec("embed", 0.9))


def partition(context: dict[str, Any], **overrides: Any) -> str:
    arguments: dict[str, Any] = {"scope": "key:1", "protocol": "openai", "requested_model": "normal",
                                 "context": context, **overrides}
    return semantic_partition(overrides.pop("spec", SEMANTIC), **{k: v for k, v in arguments.items() if k != "spec"})


def test_the_latest_user_turn_is_split_from_its_context() -> None:
    turn = latest_user_turn("openai", BODY)
    assert turn is not None
    text, context = turn
    assert text == "hi"
    assert context["messages"] == [{"role": "system", "content": "be brief"}]
    assert context["tools"] == BODY["tools"]


@pytest.mark.parametrize(("protocol", "body", "text"), [
    ("anthropic", {"messages": [{"role": "user", "content": [{"type": "text", "text": "a"},
                                                             {"type": "text", "text": "b"}]}]}, "a\nb"),
    ("responses", {"input": "just text"}, "just text"),
    ("responses", {"input": [{"type": "message", "role": "user", "content": [{"type": "input_text",
                                                                               "text": "q"}]}]}, "q"),
    ("responses", {"input": [{"role": "user", "content": "q2"}]}, "q2"),
])
def test_a_text_turn_of_each_protocol(protocol: Any, body: dict[str, Any], text: str) -> None:
    turn = latest_user_turn(protocol, body)
    assert turn is not None
    assert turn[0] == text


@pytest.mark.parametrize(("protocol", "body"), [
    ("openai", {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]}),
    ("openai", {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "prefill"}]}),
    ("openai", {"messages": [{"role": "tool", "tool_call_id": "c", "content": "42"}]}),
    ("openai", {"messages": [{"role": "user", "content": "   "}]}),
    ("openai", {"messages": []}),
    ("responses", {"input": [{"type": "function_call_output", "call_id": "c", "output": "1"}]}),
])
def test_other_turns_are_matched_exactly_only(protocol: Any, body: dict[str, Any]) -> None:
    assert latest_user_turn(protocol, body) is None


def test_the_partition_holds_everything_but_the_turn() -> None:
    _, context = latest_user_turn("openai", BODY) or ("", {})
    same = latest_user_turn("openai", {**BODY, "messages": [*BODY["messages"][:-1],
                                                            {"role": "user", "content": "hello there"}]})
    assert same is not None
    assert partition(same[1]) == partition(context)
    assert partition({**context, "tools": []}) != partition(context)
    assert partition({**context, "messages": []}) != partition(context)
    assert partition({**context, "temperature": 1}) != partition(context)
    assert partition({**context, "stream": True}) == partition(context)
    assert partition(context, scope="key:2") != partition(context)
    assert partition(context, spec=CacheSpec(name="normal", ttl_s=600, semantic=SemanticSpec("other"))) != \
        partition(context)
