"""extract_features: what counts, in both body shapes, and that no JSON a client sends can make it raise."""

from __future__ import annotations

import dataclasses
import json
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from routing.core.features import IMAGE_TOKEN_ALLOWANCE, Features, extract_features

PNG = {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo" * 50}


def openai_body(system: str, turns: list[tuple[str, Any]], **extra: Any) -> dict[str, Any]:
    """An OpenAI chat body; turns are ("user"|"assistant", text), ("calls", [(name, args)]), ("results", [..])."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    for kind, payload in turns:
        if kind in ("user", "assistant"):
            messages.append({"role": kind, "content": payload})
        elif kind == "calls":
            calls = [
                {"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
                for i, (name, args) in enumerate(payload)
            ]
            messages.append({"role": "assistant", "content": None, "tool_calls": calls})
        elif kind == "results":
            messages += [{"role": "tool", "tool_call_id": f"c{i}", "content": r} for i, r in enumerate(payload)]
        elif kind == "image":
            parts = [{"type": "text", "text": payload}, {"type": "image_url", "image_url": {"url": "data:x"}}]
            messages.append({"role": "user", "content": parts})
    return {"model": "normal", "messages": messages, **extra}


def anthropic_body(system: str, turns: list[tuple[str, Any]], **extra: Any) -> dict[str, Any]:
    """The same conversation as ``openai_body`` in the Anthropic Messages shape."""
    messages: list[dict[str, Any]] = []
    for kind, payload in turns:
        if kind in ("user", "assistant"):
            messages.append({"role": kind, "content": payload})
        elif kind == "calls":
            blocks = [
                {"type": "tool_use", "id": f"c{i}", "name": name, "input": args}
                for i, (name, args) in enumerate(payload)
            ]
            messages.append({"role": "assistant", "content": blocks})
        elif kind == "results":
            blocks = [{"type": "tool_result", "tool_use_id": f"c{i}", "content": r} for i, r in enumerate(payload)]
            messages.append({"role": "user", "content": blocks})
        elif kind == "image":
            blocks = [{"type": "text", "text": payload}, {"type": "image", "source": PNG}]
            messages.append({"role": "user", "content": blocks})
    body: dict[str, Any] = {"model": "normal", "max_tokens": 1024, "messages": messages, **extra}
    if system:
        body["system"] = system
    return body


AGENT_TURNS: list[tuple[str, Any]] = [
    ("user", "What is the weather in Paris and Rome?"),
    ("calls", [("get_weather", {"city": "Paris", "units": ["metric"]}), ("get_weather", {"city": "Rome"})]),
    ("results", ["sunny, 21C", "rain, 14C"]),
    ("assistant", "Paris is sunny; Rome is rainy."),
    ("user", "Thanks!"),
]


def both(system: str, turns: list[tuple[str, Any]], **extra: Any) -> list[Any]:
    return [
        extract_features(openai_body(system, turns, **extra), "openai"),
        extract_features(anthropic_body(system, turns, **extra), "anthropic"),
    ]


@pytest.mark.parametrize("shape", [0, 1], ids=["openai", "anthropic"])
def test_it_counts_system_messages_tool_results_and_argument_strings(shape: int) -> None:
    features = both("Be brief.", AGENT_TURNS)[shape]
    expected = (
        len("Be brief.")
        + len("What is the weather in Paris and Rome?")
        + len("Paris") + len("metric") + len("Rome")  # argument string values, not keys or JSON
        + len("sunny, 21C") + len("rain, 14C")
        + len("Paris is sunny; Rome is rainy.")
        + len("Thanks!")
    )  # fmt: skip
    assert features.total_chars == expected


def test_it_gives_equal_features_for_equivalent_bodies_of_both_shapes() -> None:
    openai, anthropic = both("Be brief.", AGENT_TURNS)
    for field in ("total_chars", "latest_user_text", "message_count", "code_evidence", "attachments",
                  "system_text", "opening_turns", "estimated_input_tokens", "modalities"):  # fmt: skip
        assert getattr(openai, field) == getattr(anthropic, field), field


def test_it_builds_complete_frozen_features() -> None:
    features = extract_features(openai_body("Be brief.", AGENT_TURNS), "openai")
    values = {field.name: getattr(features, field.name) for field in dataclasses.fields(Features)}
    assert set(vars(features)) == set(values)  # every field was set, and nothing else
    assert Features(**values) == features
    with pytest.raises(dataclasses.FrozenInstanceError):
        features.total_chars = 0  # type: ignore[misc]


def test_it_gives_each_request_its_own_fields_and_the_absent_values_to_optional_ones() -> None:
    plain = extract_features({"messages": [{"role": "user", "content": "hi"}]}, "openai")
    absent = {"tools": (), "tool_choice": None, "forced_tool": None, "structured_output": "", "output_schema": None,
              "output_schema_strict": False, "reasoning": "", "max_output_tokens": None, "metadata_user_id": None,
              "session_id": None, "prompt_cache_key": None, "user": None}  # fmt: skip
    assert {name: getattr(plain, name) for name in absent} == absent
    assert [name for name, value in vars(plain).items() if value is None and name not in absent] == []  # all set
    # One optional key read does not disturb the others' absent values.
    with_user = extract_features({"messages": [{"role": "user", "content": "hi"}], "user": "u1"}, "openai")
    assert {name: getattr(with_user, name) for name in absent} == {**absent, "user": "u1"}
    assert vars(plain) is not vars(with_user)


def test_it_reads_any_mapping_like_a_dict() -> None:
    body = openai_body("Be brief.", AGENT_TURNS, tools=[{"name": "t"}], user="u1", max_tokens=5)
    assert extract_features(MappingProxyType(body), "openai") == extract_features(body, "openai")


def test_it_counts_every_text_once_wherever_it_is() -> None:
    body = {
        "system": [{"type": "text", "text": "abc"}, "de"],
        "messages": [
            {"role": "developer", "content": [{"type": "text", "text": "fgh"}]},
            {"role": "user", "content": ""},
            {"role": "assistant", "content": "Checking.", "tool_calls": [{"function": {"arguments": '{"q": "ij"}'}}]},
            {"role": "tool", "content": [{"type": "text", "text": "klm"}]},
            {"role": "system", "content": "nopq"},  # a later system message counts, without joining system_text
            {"role": "user", "content": ["r", {"type": "text", "text": ""}]},
        ],
    }
    features = extract_features(body, "openai")
    assert features.total_chars == sum(map(len, ["abc", "de", "fgh", "", "Checking.", "ij", "klm", "nopq", "r", ""]))
    assert features.system_text == "abc\n\nde\n\nfgh"
    assert features.latest_user_text == "r\n"
    assert features.message_count == 3


def test_it_does_not_count_tool_definitions_schemas_attachment_data_or_thinking() -> None:
    schema = {"type": "object", "properties": {"q": {"type": "string", "description": "x" * 500}}}
    body = {
        "model": "normal",
        "tools": [{"name": "search", "description": "y" * 500, "input_schema": schema}],
        "output_format": {"type": "json_schema", "schema": schema},
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "hello"}, {"type": "image", "source": PNG}]},
            {"role": "assistant", "content": [{"type": "thinking", "thinking": "z" * 900, "signature": "s"}]},
        ],
    }
    assert extract_features(body, "anthropic").total_chars == len("hello")


def test_it_counts_unicode_code_points_not_bytes() -> None:
    features = extract_features({"messages": [{"role": "user", "content": "根本原因é"}]}, "openai")
    assert features.total_chars == 5


@pytest.mark.parametrize(
    ("messages", "latest"),
    [
        ([{"role": "user", "content": "first"}, {"role": "assistant", "content": "ok"},
          {"role": "user", "content": "second"}], "second"),
        ([{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}], "a\nb"),
        # Anthropic: a turn of tool results only is the agent loop, not the person: look further back.
        ([{"role": "user", "content": "fix it"},
          {"role": "assistant", "content": [{"type": "tool_use", "id": "1", "name": "t", "input": {}}]},
          {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "1", "content": "done"}]}],
         "fix it"),
        # A turn with tool results and text is the person's: its text blocks only.
        ([{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "1", "content": "out"},
                                       {"type": "text", "text": "now think hard"}]}], "now think hard"),
        # OpenAI tool messages are not user messages.
        ([{"role": "user", "content": "fix it"}, {"role": "tool", "content": "done"}], "fix it"),
        # An image-only message is the latest user message; it has no text.
        ([{"role": "user", "content": "before"},
          {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}], ""),
        ([{"role": "assistant", "content": "hi"}], ""),
    ],
)  # fmt: skip
def test_it_takes_the_latest_user_message_that_is_not_only_tool_results(
    messages: list[dict[str, Any]], latest: str
) -> None:
    assert extract_features({"messages": messages}, "anthropic").latest_user_text == latest


@pytest.mark.parametrize(
    ("roles", "turns"),
    [
        ([], 0),
        (["user"], 1),
        (["system", "user"], 1),
        (["system", "user", "assistant", "user"], 3),
        (["user", "assistant", "tool", "tool", "user"], 3),  # tool results and the next user message: one turn
        (["user", "user", "assistant", "assistant"], 2),
        (["developer", "user", "system", "assistant"], 2),
    ],
)
def test_it_counts_conversation_depth_in_turns_without_system_messages(roles: list[str], turns: int) -> None:
    body = {"messages": [{"role": role, "content": "x"} for role in roles]}
    features = extract_features(body, "openai")
    assert features.message_count == turns
    assert features.raw_message_count == len(roles)


def test_it_counts_parallel_tool_results_as_one_turn_in_both_shapes() -> None:
    openai, anthropic = both("", AGENT_TURNS)
    assert openai.message_count == anthropic.message_count == 5
    assert openai.raw_message_count == 6
    assert anthropic.raw_message_count == 5


def test_it_reads_tools_of_every_shape_with_names_and_schemas() -> None:
    schema = {"type": "object", "properties": {"city": {"type": "string"}}}
    body = {
        "tools": [
            {"type": "function", "function": {"name": "weather", "description": "w", "parameters": schema}},
            {"name": "lookup", "input_schema": schema},
            {"type": "web_search_20250305", "name": "web_search"},
            {"type": "custom", "custom": {"name": "patch"}},
            "not a tool",
        ],
        "functions": [{"name": "legacy", "parameters": schema}],
    }
    features = extract_features(body, "openai")
    assert features.tool_names == ("weather", "lookup", "web_search", "patch", "legacy")
    assert [tool.kind for tool in features.tools] == ["function", "function", "web_search_20250305", "custom",
                                                       "function"]  # fmt: skip
    assert features.tools[0].parameters == schema
    assert features.tools[1].parameters == schema
    assert features.tools[2].parameters is None
    assert features.tool_count == 5


@pytest.mark.parametrize(
    ("body", "choice", "forced"),
    [
        ({}, None, None),
        ({"tool_choice": "auto"}, "auto", None),
        ({"tool_choice": "none"}, "none", None),
        ({"tool_choice": "required"}, "required", None),
        ({"tool_choice": {"type": "function", "function": {"name": "f"}}}, "tool", "f"),
        ({"tool_choice": {"type": "any"}}, "required", None),
        ({"tool_choice": {"type": "auto"}}, "auto", None),
        ({"tool_choice": {"type": "tool", "name": "g"}}, "tool", "g"),
        ({"tool_choice": {"type": "allowed_tools", "allowed_tools": {"mode": "required", "tools": []}}},
         "required", None),
        ({"function_call": {"name": "h"}}, "tool", "h"),
        ({"tool_choice": 7}, None, None),
        ({"tool_choice": "sometimes"}, None, None),
    ],
)  # fmt: skip
def test_it_normalises_tool_choice(body: dict[str, Any], choice: str | None, forced: str | None) -> None:
    features = extract_features(body, "openai")
    assert (features.tool_choice, features.forced_tool) == (choice, forced)


SCHEMA = {"type": "object", "properties": {"total": {"type": "number"}}}


@pytest.mark.parametrize(
    ("body", "kind", "schema", "strict"),
    [
        ({}, "", None, False),
        ({"response_format": {"type": "text"}}, "", None, False),
        ({"response_format": {"type": "json_object"}}, "json_object", None, False),
        ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": SCHEMA}}},
         "json_schema", SCHEMA, False),
        ({"response_format": {"type": "json_schema", "json_schema": {"schema": SCHEMA, "strict": True}}},
         "json_schema", SCHEMA, True),
        ({"response_format": {"type": "json_schema", "json_schema": "bad"}}, "json_schema", None, False),
        ({"output_format": {"type": "json_schema", "schema": SCHEMA}}, "json_schema", SCHEMA, True),
        ({"output_config": {"format": {"type": "json_schema", "schema": SCHEMA}}}, "json_schema", SCHEMA, True),
        ({"output_config": {"effort": "high"}}, "", None, False),
        # A forced tool is scored by the tools signal, not again as structured output.
        ({"tools": [{"name": "t"}], "tool_choice": {"type": "tool", "name": "t"}}, "", None, False),
    ],
)  # fmt: skip
def test_it_detects_structured_output_requests(
    body: dict[str, Any], kind: str, schema: dict[str, Any] | None, strict: bool
) -> None:
    features = extract_features(body, "openai")
    assert (features.structured_output, features.output_schema, features.output_schema_strict) == (
        kind,
        schema,
        strict,
    )


@pytest.mark.parametrize(
    ("content", "attachments", "modalities"),
    [
        ("plain", (), {"text"}),
        ([{"type": "image_url", "image_url": {"url": "x"}}], ("image",), {"image"}),
        ([{"type": "text", "text": "t"}, {"type": "input_audio", "input_audio": {"data": "x"}}],
         ("audio",), {"text", "audio"}),
        ([{"type": "file", "file": {"file_id": "f"}}], ("file",), {"file"}),
        ([{"type": "image", "source": PNG}, {"type": "document", "source": {"type": "text", "data": "d"}}],
         ("image", "file"), {"image", "file"}),
        # Images inside a tool result are attachments too.
        ([{"type": "tool_result", "tool_use_id": "1", "content": [{"type": "image", "source": PNG}]}],
         ("image",), {"image"}),
        ([{"type": "hologram"}], (), set()),
    ],
)  # fmt: skip
def test_it_finds_attachments_and_modalities(content: Any, attachments: tuple[str, ...], modalities: set[str]) -> None:
    features = extract_features({"messages": [{"role": "user", "content": content}]}, "anthropic")
    assert features.attachments == attachments
    assert features.modalities == frozenset(modalities)


@pytest.mark.parametrize(
    ("text", "evidence"),
    [
        ("Why does this fail?\n```python\nprint(1)\n```", "fenced code block"),
        ("diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py", "diff --git"),
        ("--- a/x.py\n+++ b/x.py\n@@ -1,3 +1,4 @@\n-a\n+b", "unified diff"),
        ('Traceback (most recent call last):\n  File "a.py", line 1, in <module>\nValueError', "Python traceback"),
        ('  File "/app/main.py", line 12, in run\n    go()', "Python traceback"),
        ("panic: runtime error: index out of range", "panic:"),
        ("goroutine 1 [running]:\nmain.main()", "Go stack trace"),
        ("thread 'main' panicked at src/main.rs:2:5", "Rust panic"),
        ('Exception in thread "main" java.lang.NullPointerException', "Java exception"),
        ("java.lang.IllegalStateException: boom\n\tat com.acme.App.run(App.java:42)\n", "JVM stack trace"),
        ("Error\n    at Object.<anonymous> (/srv/app/index.js:10:5)\n    at Module._compile (node:internal/x:1:2)",
         "JavaScript stack trace"),
        ("Error\n    at handler (/srv/app/src/api.ts:88:13)", "JavaScript stack trace"),
        ("System.Exception: x\n   at Acme.Run() in C:\\src\\Run.cs:line 42", ".NET stack trace"),
        ("I will be at home at 5. The file is called report.js: see it.", ""),
        ("Panic is not helpful; stay calm", ""),
        ("a ` quote and `` two", ""),
    ],
)  # fmt: skip
def test_it_detects_code_and_diagnostics(text: str, evidence: str) -> None:
    features = extract_features({"messages": [{"role": "user", "content": text}]}, "openai")
    assert features.code_evidence == evidence
    assert features.has_code is bool(evidence)


@pytest.mark.parametrize(
    ("messages", "evidence"),
    [
        # A rule fires on a later line after earlier lines that only start like one.
        (["I was at home.\n  at five: dinner\n  at handler (/srv/app/api.ts:88:13)"], "JavaScript stack trace"),
        (["File \"notes.txt\" is missing\nat Foo.bar(Foo.java:1)"], "JVM stack trace"),
        # The first line of every message, not only of the first one.
        (["hello", "diff --git a/x b/x"], "diff --git"),
        (["hello", "", "\tgoroutine 7 [chan receive]:"], "Go stack trace"),
        (["hello", "at noon (see below)", "thanks"], ""),
    ],
)  # fmt: skip
def test_it_checks_every_line_start_of_every_message(messages: list[str], evidence: str) -> None:
    body = {"messages": [{"role": ("user", "assistant")[i % 2], "content": m} for i, m in enumerate(messages)]}
    assert extract_features(body, "openai").code_evidence == evidence


def test_it_reads_a_string_content_next_to_tool_calls() -> None:
    call = {"function": {"arguments": json.dumps({"diff": "diff --git a/x b/x"})}}
    body = {"messages": [{"role": "assistant", "content": "Patching.", "tool_calls": [call]}]}
    features = extract_features(body, "openai")
    assert features.total_chars == len("Patching.") + len("diff --git a/x b/x")
    assert features.code_evidence == "diff --git"
    assert features.opening_turns == (("assistant", "Patching."),)


def test_it_finds_code_in_tool_results_and_tool_call_arguments_but_not_in_the_system_prompt() -> None:
    in_system = both("Answer like this:\n```json\n{}\n```", [("user", "hi")])
    assert [f.code_evidence for f in in_system] == ["", ""]
    in_result = both("", [("user", "run tests"), ("calls", [("sh", {"cmd": "pytest"})]),
                          ("results", ["Traceback (most recent call last):\n..."])])  # fmt: skip
    assert [f.code_evidence for f in in_result] == ["Python traceback"] * 2
    in_arguments = both("", [("user", "apply"), ("calls", [("patch", {"diff": "diff --git a/x b/x"})])])
    assert [f.code_evidence for f in in_arguments] == ["diff --git"] * 2


@pytest.mark.parametrize(
    ("extra", "reasoning"),
    [
        ({}, ""),
        ({"reasoning_effort": "minimal"}, ""),
        ({"reasoning_effort": "low"}, ""),
        ({"reasoning_effort": "none"}, ""),
        ({"reasoning_effort": "medium"}, "reasoning_effort=medium"),
        ({"reasoning_effort": "HIGH"}, "reasoning_effort=high"),
        ({"reasoning_effort": "xhigh"}, "reasoning_effort=xhigh"),
        ({"reasoning": {"effort": "high"}}, "reasoning.effort=high"),
        ({"thinking": {"type": "enabled", "budget_tokens": 2048}}, "thinking=enabled"),
        ({"thinking": {"type": "adaptive"}}, "thinking=adaptive"),
        ({"thinking": {"type": "disabled"}}, ""),
        ({"thinking": True}, ""),
        ({"reasoning_effort": 3}, ""),
    ],
)
def test_it_detects_explicit_reasoning_requests(extra: dict[str, Any], reasoning: str) -> None:
    features = extract_features({"messages": [], **extra}, "openai")
    assert features.reasoning == reasoning
    assert features.reasoning_requested is bool(reasoning)


@pytest.mark.parametrize(
    ("extra", "max_output"),
    [
        ({}, None),
        ({"max_tokens": 100}, 100),
        ({"max_completion_tokens": 50, "max_tokens": 100}, 50),
        ({"max_completion_tokens": 0}, 0),
        ({"max_tokens": True}, None),
        ({"max_tokens": "100"}, None),
    ],
)
def test_it_reads_the_output_token_limit(extra: dict[str, Any], max_output: int | None) -> None:
    assert extract_features(extra, "openai").max_output_tokens == max_output


def test_it_reads_the_stream_flag_only_when_true() -> None:
    assert extract_features({"stream": True}, "openai").stream is True
    assert extract_features({"stream": "true"}, "openai").stream is False
    assert extract_features({}, "openai").stream is False


def test_it_estimates_input_tokens_from_characters_and_images() -> None:
    openai, anthropic = both("", [("image", "x" * 4001)])
    assert openai.estimated_input_tokens == anthropic.estimated_input_tokens == 1001 + IMAGE_TOKEN_ALLOWANCE


def test_it_reads_the_session_fields() -> None:
    body = {"metadata": {"user_id": "user_1_session_2"}, "session_id": "s", "prompt_cache_key": "p", "user": 42}
    features = extract_features(body, "anthropic")
    assert (features.metadata_user_id, features.session_id, features.prompt_cache_key, features.user) == (
        "user_1_session_2",
        "s",
        "p",
        "42",
    )
    blank = extract_features({"metadata": "x", "session_id": "  ", "user": None}, "openai")
    assert (blank.metadata_user_id, blank.session_id, blank.user) == (None, None, None)


def test_it_keeps_the_opening_of_the_conversation_for_session_identity() -> None:
    first = openai_body("You are helpful.", [("assistant", "Hello!"), ("user", "Plan my trip")])
    later = openai_body(
        "You are helpful.",
        [("assistant", "Hello!"), ("user", "Plan my trip"), ("assistant", "Where to?"), ("user", "Rome")],
    )
    later["messages"].append({"role": "system", "content": "A reminder injected later."})
    a, b = extract_features(first, "openai"), extract_features(later, "openai")
    assert a.system_text == b.system_text == "You are helpful."
    assert a.opening_turns == b.opening_turns == (("assistant", "Hello!"), ("user", "Plan my trip"))


def test_it_marks_attachments_in_the_opening_turns() -> None:
    features = both("", [("image", "What is this?")])
    assert [f.opening_turns for f in features] == [(("user", "What is this?\n[image]"),)] * 2


@pytest.mark.parametrize(
    "body",
    [
        None,
        [],
        "text",
        {"messages": None},
        {"messages": "hello"},
        {"messages": [None, 1, "x", [], {"role": 5, "content": 7}]},
        {"messages": [{"role": "user", "content": [None, 3, {"type": None}, {"type": "text", "text": 9}]}]},
        {"messages": [{"role": "assistant", "tool_calls": [None, {"function": "x"}, {"function": {"arguments": 5}}]}]},
        {"messages": [{"role": "assistant", "tool_calls": [{"function": {"arguments": "{not json"}}]}]},
        {"messages": [{"role": "assistant", "tool_calls": [{"function": {"arguments": "[" * 100_000}}]}]},
        {"tools": {"a": 1}, "tool_choice": [], "response_format": "json", "thinking": {"type": 1}},
        {"system": [None, {"text": 5}, "raw"], "metadata": {"user_id": {"x": 1}}, "model": 3},
    ],
)  # fmt: skip
def test_it_never_raises_on_odd_input(body: Any) -> None:
    extract_features(body, "openai")
    extract_features(body, "anthropic")


def test_it_walks_deeply_nested_tool_input_without_recursion() -> None:
    nested: Any = "leaf"
    for _ in range(50_000):
        nested = {"a": [nested]}
    body = {"messages": [{"role": "assistant", "content": [{"type": "tool_use", "input": nested}]}]}
    assert extract_features(body, "anthropic").total_chars == 4


def test_it_takes_invalid_json_arguments_as_free_text() -> None:
    body = {"messages": [{"role": "assistant", "tool_calls": [{"function": {"arguments": "{oops"}}]}]}
    assert extract_features(body, "openai").total_chars == len("{oops")


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=40,
)
KEYS = st.sampled_from(["role", "content", "type", "text", "tool_calls", "function", "arguments", "input",
                        "tool_result", "image_url", "name", "system", "messages", "tools", "tool_choice"])  # fmt: skip
MESSAGE = st.dictionaries(KEYS | st.text(max_size=5), JSON | st.sampled_from(["user", "assistant", "text"]))


@settings(max_examples=100, deadline=None, database=None)
@given(
    body=st.dictionaries(KEYS, JSON | st.lists(MESSAGE, max_size=5), max_size=8),
    shape=st.sampled_from(["openai", "anthropic"]),
)
def test_it_never_raises_on_arbitrary_json(body: dict[str, Any], shape: Any) -> None:
    features = extract_features(body, shape)
    assert features.total_chars >= 0
    assert features.message_count >= 0
