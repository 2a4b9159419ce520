"""classify: every signal alone and at its boundaries, the reasoning short-cut, keywords and both shapes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from routing.core.classifier import DEFAULT_KEYWORDS, Signal, Tier, TierVerdict, classify, keyword_matcher
from routing.core.features import extract_features

IMAGE = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
SNIPPET = "Why does this print None?\n```python\ndef f(x):\n    x + 1\nprint(f(2))\n```"


def user(content: Any, **extra: Any) -> dict[str, Any]:
    return {"model": "normal", "messages": [{"role": "user", "content": content}], **extra}


def tools(n: int) -> list[dict[str, Any]]:
    return [{"type": "function", "function": {"name": f"t{i}", "parameters": {"type": "object"}}} for i in range(n)]


def turns(n: int) -> dict[str, Any]:
    return {"messages": [{"role": ("user", "assistant")[i % 2], "content": "ok"} for i in range(n)]}


def verdict_of(body: dict[str, Any], shape: Any = "openai", **kwargs: Any) -> Any:
    return classify(extract_features(body, shape), **kwargs)


# (case, body, score, {signal: points}, tier)
SIGNAL_TABLE: list[tuple[str, dict[str, Any], int, dict[str, int], str]] = [
    ("nothing", user("hello"), 0, {}, "easy"),
    ("keyword", user("Please think step by step"), 4, {"keywords": 4}, "hard"),
    ("code", user(SNIPPET), 3, {"code": 3}, "easy"),
    ("1 tool", user("hi", tools=tools(1)), 2, {"tools": 2}, "easy"),
    ("4 tools", user("hi", tools=tools(4)), 2, {"tools": 2}, "easy"),
    ("5 tools", user("hi", tools=tools(5)), 4, {"tools": 4}, "hard"),
    ("json schema", user("hi", response_format={"type": "json_schema", "json_schema": {"schema": {}}}), 2,
     {"structured_output": 2}, "easy"),
    ("json object", user("hi", response_format={"type": "json_object"}), 2, {"structured_output": 2}, "easy"),
    ("attachment", user([{"type": "text", "text": "what is it"}, IMAGE]), 2, {"attachments": 2}, "easy"),
    ("1999 chars", user("a" * 1999), 0, {}, "easy"),
    ("2000 chars", user("a" * 2000), 1, {"context": 1}, "easy"),
    ("7999 chars", user("a" * 7999), 1, {"context": 1}, "easy"),
    ("8000 chars", user("a" * 8000), 3, {"context": 3}, "easy"),
    ("31999 chars", user("a" * 31999), 3, {"context": 3}, "easy"),
    ("32000 chars", user("a" * 32000), 6, {"context": 6}, "hard"),
    ("6 turns", turns(6), 0, {}, "easy"),
    ("7 turns", turns(7), 1, {"depth": 1}, "easy"),
]  # fmt: skip


@pytest.mark.parametrize(("case", "body", "score", "points", "tier"), SIGNAL_TABLE, ids=[r[0] for r in SIGNAL_TABLE])
def test_it_scores_each_signal_alone_and_at_its_boundaries(
    case: str, body: dict[str, Any], score: int, points: dict[str, int], tier: str
) -> None:
    verdict = verdict_of(body)
    assert {s.name: s.points for s in verdict.signals} == points
    assert verdict.score == score
    assert verdict.tier == tier
    assert verdict.reasoning_shortcut is False


def test_it_keeps_a_short_code_snippet_alone_on_the_easy_tier() -> None:
    verdict = verdict_of(user(SNIPPET))
    assert (verdict.tier, verdict.score) == ("easy", 3)


def test_it_escalates_code_with_2k_characters_of_context() -> None:
    context = "Here is the module this runs in. " + "x = compute(y)  # bookkeeping\n" * 70
    assert len(context + SNIPPET) >= 2000
    verdict = verdict_of(user(context + SNIPPET))
    assert (verdict.tier, verdict.score) == ("hard", 4)
    assert [s.name for s in verdict.signals] == ["code", "context"]


@pytest.mark.parametrize(
    ("extra", "shortcut"),
    [
        ({"reasoning_effort": "minimal"}, False),
        ({"reasoning_effort": "low"}, False),
        ({"reasoning_effort": "medium"}, True),
        ({"reasoning_effort": "high"}, True),
        ({"reasoning_effort": "xhigh"}, True),
        ({"thinking": {"type": "enabled", "budget_tokens": 1024}}, True),
        ({"thinking": {"type": "adaptive"}}, True),
        ({"thinking": {"type": "disabled"}}, False),
    ],
)
def test_it_sends_explicit_reasoning_requests_straight_to_hard(extra: dict[str, Any], shortcut: bool) -> None:
    verdict = verdict_of(user("hi", **extra))
    assert verdict.reasoning_shortcut is shortcut
    assert verdict.tier == ("hard" if shortcut else "easy")
    assert verdict.score == 0  # the short-cut adds no points: the score still shows the other signals
    if shortcut:
        assert verdict.signals[0].name == "reasoning"
        assert verdict.signals[0].points == 0


def test_it_sums_the_signals_and_reports_each_with_its_detail() -> None:
    body = user(
        [{"type": "text", "text": "Find the root cause:\n```\nboom\n```"}, IMAGE, IMAGE],
        tools=tools(6),
        response_format={"type": "json_object"},
    )
    verdict = verdict_of(body)
    assert verdict.signals == (
        Signal("keywords", 4, "root cause*"),
        Signal("code", 3, "fenced code block"),
        Signal("tools", 4, "6 tools"),
        Signal("structured_output", 2, "json_object"),
        Signal("attachments", 2, "2 images"),
    )
    assert verdict.score == 15


@pytest.mark.parametrize(("threshold", "tier"), [(1, "hard"), (3, "hard"), (4, "easy"), (10, "easy")])
def test_it_applies_the_threshold_inclusively(threshold: int, tier: str) -> None:
    assert verdict_of(user(SNIPPET), threshold=threshold).tier == tier


@pytest.mark.parametrize(("threshold", "tier"), [(-1, "hard"), (0, "hard"), (1, "easy")])
def test_it_applies_the_threshold_to_a_request_without_signals(threshold: int, tier: Tier) -> None:
    verdict = verdict_of(user("hello"), threshold=threshold)
    assert verdict == TierVerdict(tier=tier, score=0, signals=(), reasoning_shortcut=False)


def openai_body(system: str, conversation: list[tuple[str, Any]], **extra: Any) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}]
    for kind, payload in conversation:
        if kind == "calls":
            calls = [
                {"id": n, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}} for n, a in payload
            ]
            messages.append({"role": "assistant", "content": None, "tool_calls": calls})
        elif kind == "results":
            messages += [{"role": "tool", "tool_call_id": i, "content": r} for i, r in payload]
        elif kind == "image":
            messages.append({"role": "user", "content": [{"type": "text", "text": payload}, IMAGE]})
        else:
            messages.append({"role": kind, "content": payload})
    body = {"model": "normal", "messages": messages, **extra}
    if "tool_defs" in extra:
        body["tools"] = [{"type": "function", "function": {"name": n, "parameters": s}} for n, s in extra["tool_defs"]]
    return body


def anthropic_body(system: str, conversation: list[tuple[str, Any]], **extra: Any) -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    for kind, payload in conversation:
        if kind == "calls":
            blocks = [{"type": "tool_use", "id": n, "name": n, "input": a} for n, a in payload]
            messages.append({"role": "assistant", "content": blocks})
        elif kind == "results":
            blocks = [{"type": "tool_result", "tool_use_id": i, "content": r} for i, r in payload]
            messages.append({"role": "user", "content": blocks})
        elif kind == "image":
            source = {"type": "base64", "media_type": "image/png", "data": "AAAA"}
            messages.append(
                {"role": "user", "content": [{"type": "text", "text": payload}, {"type": "image", "source": source}]}
            )
        else:
            messages.append({"role": kind, "content": payload})
    body = {"model": "normal", "system": system, "max_tokens": 512, "messages": messages, **extra}
    if "tool_defs" in extra:
        body["tools"] = [{"name": n, "input_schema": s} for n, s in extra["tool_defs"]]
    return body


LONG = "The quarterly report covers revenue, costs and hiring in each region. " * 40
EQUIVALENT = [
    ("chat", "Be nice.", [("user", "hello")], {}),
    ("keyword in last turn", "Be nice.", [("user", "hi"), ("assistant", "hey"), ("user", "Denk gründlich nach!")], {}),
    ("keyword only earlier", "", [("user", "think hard"), ("assistant", "ok"), ("user", "thanks")], {}),
    ("agent loop", "You are an agent.", [
        ("user", "Why is CI red? Find the root cause."),
        ("calls", [("sh", {"cmd": "pytest -x"}), ("read", {"path": "ci.log"})]),
        ("results", [("sh", "Traceback (most recent call last):\n  boom"), ("read", LONG)]),
        ("assistant", "Looking."),
        ("calls", [("read", {"path": "app.py"})]),
        ("results", [("read", LONG * 3)]),
        ("assistant", "Found it."),
        ("user", "great"),
    ], {"tool_defs": [(f"t{i}", {"type": "object"}) for i in range(5)]}),
    ("image", "", [("image", "Was zeigt dieses Bild? 一步一步")], {}),
    ("reasoning", "", [("user", "hi")], {"thinking": {"type": "enabled", "budget_tokens": 2048}}),
]  # fmt: skip


@pytest.mark.parametrize(("case", "system", "conversation", "extra"), EQUIVALENT, ids=[e[0] for e in EQUIVALENT])
def test_it_scores_both_shapes_the_same(
    case: str, system: str, conversation: list[tuple[str, Any]], extra: dict[str, Any]
) -> None:
    openai = verdict_of(openai_body(system, conversation, **extra), "openai")
    anthropic = verdict_of(anthropic_body(system, conversation, **extra), "anthropic")
    assert openai == anthropic


def test_it_scores_the_agent_loop_on_every_signal_it_carries() -> None:
    case = EQUIVALENT[3]
    verdict = verdict_of(anthropic_body(case[1], case[2], **case[3]), "anthropic")
    assert {s.name: s.points for s in verdict.signals} == {"code": 3, "tools": 4, "context": 3, "depth": 1}
    assert verdict.tier == "hard"  # the keyword was in an earlier turn, so it does not count


@pytest.mark.parametrize(
    ("text", "keyword"),
    [
        ("Please THINK HARD about this", "think hard"),
        ("think\n  carefully, please", "think carefully"),
        ("Explain it step-by-step", "step by step"),
        ("explain it Step By Step", "step by step"),
        ("What are the root causes?", "root cause*"),
        ("do a root-cause analysis", "root cause*"),
        ("Prove that it halts.", "prove"),
        ("Can you analyze in depth why", "analyze in depth"),
        ("ultrathink: fix the parser", "ultrathink"),
        ("Erkläre es Schritt für Schritt.", "Schritt für Schritt"),
        ("ERKLÄRE ES SCHRITT FÜR SCHRITT", "Schritt für Schritt"),
        ("Bitte gründlich nachdenken", "gründlich nachdenken"),
        ("Was sind die Grundursachen?", "Grundursache*"),
        ("Mach eine Fehlerursachenanalyse", "*Ursachenanalyse*"),
        ("请一步一步地解释", "一步一步"),
        ("请逐步推导", "逐步"),
        ("找出根本原因。", "根本原因"),
        ("请仔细思考这个问题", "仔细思考"),
        ("深入分析一下", "深入分析"),
        ("ステップバイステップで説明して", "ステップバイステップ"),
        ("hello there", None),
        ("please improve this text", None),  # "prove" only as a whole word
        ("proofread my essay", None),
        ("I think hardware is the issue", None),
        ("a rootcause", None),
        ("steps by steps", None),
    ],
)
def test_it_matches_default_keywords_case_insensitively_on_word_boundaries(text: str, keyword: str | None) -> None:
    verdict = verdict_of(user(text))
    found = [s.detail for s in verdict.signals if s.name == "keywords"]
    assert found == ([keyword] if keyword else [])
    assert verdict.tier == ("hard" if keyword else "easy")


def test_it_reads_keywords_only_in_the_latest_user_message() -> None:
    body = {
        "messages": [
            {"role": "system", "content": "Always think step by step."},
            {"role": "user", "content": "root cause?"},
            {"role": "assistant", "content": "Let me think hard."},
            {"role": "user", "content": "ok thanks"},
        ]
    }
    assert [s.name for s in verdict_of(body).signals] == []


@pytest.mark.parametrize(
    ("keywords", "text", "found"),
    [
        (["deploy plan"], "Write a DEPLOY  PLAN", "deploy plan"),
        (["deploy plan"], "think hard", None),  # a configured list replaces the defaults
        (["migrat*"], "migrations are failing", "migrat*"),
        (["migrat"], "migrations are failing", None),
        (["*graph*"], "the callgraphs", "*graph*"),
        (["ß-check"], "run the SS-CHECK", "ß-check"),  # casefold: ß and SS are the same
        (["first", "second"], "second then first", "first"),  # the earliest keyword of the list is reported
        ([" ", "*", ""], "anything", None),  # blank entries are ignored
        ([], "think hard", "think hard"),  # empty: the built-in list
        (None, "think hard", "think hard"),
    ],
)
def test_it_uses_configured_keywords(keywords: list[str] | None, text: str, found: str | None) -> None:
    verdict = verdict_of(user(text), keywords=keywords)
    assert [s.detail for s in verdict.signals if s.name == "keywords"] == ([found] if found else [])


def test_it_compiles_each_keyword_list_once() -> None:
    assert keyword_matcher(("a", "b")) is keyword_matcher(("a", "b"))
    assert keyword_matcher(DEFAULT_KEYWORDS) is keyword_matcher(tuple(DEFAULT_KEYWORDS))


def test_it_finds_every_default_keyword_in_a_sentence() -> None:
    matcher = keyword_matcher(DEFAULT_KEYWORDS)
    for keyword in DEFAULT_KEYWORDS:
        plain = keyword.strip("*")
        assert matcher.first_match(f"Bitte: {plain}. 请{plain}。") == keyword
