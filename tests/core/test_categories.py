"""classify_category: each category in English, German and Chinese, the rules' order, operator keywords, limits."""

from __future__ import annotations

from typing import Any

import pytest

from routing.core.categories import (
    CATEGORIES,
    DEFAULT_CATEGORY_KEYWORDS,
    KEYWORD_CATEGORIES,
    CategoryVerdict,
    category_matcher,
    classify_category,
    forced_verdict,
    math_notation,
    merged_keywords,
)
from routing.core.classifier import KeywordMatcher
from routing.core.features import extract_features
from routing.core.keyword_index import WordIndexMatcher

IMAGE = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
FENCED = "Why does this print None?\n```python\ndef f(x):\n    x + 1\nprint(f(2))\n```"


def body(content: Any, **extra: Any) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": content}], **extra}


def verdict(content: Any, shape: Any = "openai", **kwargs: Any) -> CategoryVerdict:
    return classify_category(extract_features(body(content), shape), **kwargs)


# (case, latest user text, category, rule)
LANGUAGE_TABLE = [
    ("code en", "Can you refactor my Python class so it is easier to test?", "code", "keywords"),
    ("code de", "Bitte hilf mir, die Fehlermeldung in meinem Skript zu verstehen", "code", "keywords"),
    ("code zh", "请帮我调试这段代码", "code", "keywords"),
    ("math en", "Solve the quadratic equation for me", "math", "keywords"),
    ("math de", "Berechne die Ableitung von sin(x) mal cos(x)", "math", "keywords"),
    ("math zh", "求这个积分的值", "math", "keywords"),
    ("analysis en", "Compare the two offers and tell me which is the better deal", "analysis", "keywords"),
    ("analysis de", "Analysiere die Vor- und Nachteile eines Leasingvertrags", "analysis", "keywords"),
    ("analysis zh", "分析一下今年的市场趋势", "analysis", "keywords"),
    ("writing en", "Draft a friendly cover letter for a bakery job", "writing", "keywords"),
    ("writing de", "Schreibe ein kurzes Gedicht über den Herbst", "writing", "keywords"),
    ("writing zh", "帮我写一首关于春天的诗", "writing", "keywords"),
    ("general en", "Hi! How are you today?", "general", "default"),
    ("general de", "Guten Morgen, wie geht es dir?", "general", "default"),
    ("general zh", "你好，今天天气怎么样？", "general", "default"),
]  # fmt: skip


@pytest.mark.parametrize(("case", "text", "category", "rule"), LANGUAGE_TABLE, ids=[r[0] for r in LANGUAGE_TABLE])
def test_it_decides_each_category_in_english_german_and_chinese(case: str, text: str, category: str,
                                                                 rule: str) -> None:
    result = verdict(text)
    assert (result.category, result.rule) == (category, rule), result


def test_an_image_is_vision_whatever_the_text_says() -> None:
    result = verdict([{"type": "text", "text": "Refactor the code in this screenshot"}, IMAGE, IMAGE])
    assert result == CategoryVerdict("vision", "attachments", "2 images")


def test_an_image_in_the_anthropic_shape_is_vision_too() -> None:
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}
    result = classify_category(extract_features(body([image], max_tokens=10), "anthropic"))
    assert result.category == "vision"


def test_audio_or_a_file_alone_is_not_vision() -> None:
    audio = {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}}
    assert verdict([{"type": "text", "text": "hello"}, audio]).category == "general"


def test_a_long_context_is_long_context_at_the_threshold_and_not_below() -> None:
    # 4 counted characters per estimated token: 400 characters are 100 tokens.
    assert verdict("a" * 396, long_context_tokens=100).category == "general"
    at = verdict("a" * 400, long_context_tokens=100)
    assert (at.category, at.rule) == ("long_context", "context")
    assert "100 tokens" in at.detail


def test_the_default_long_context_threshold_is_32000_tokens() -> None:
    assert verdict("write " * 21_000).category == "writing"  # 126,000 characters: 31,500 tokens
    assert verdict("write " * 21_400).category == "long_context"


def test_the_context_counts_every_turn_not_only_the_latest() -> None:
    messages = [{"role": "user", "content": "x" * 300}, {"role": "assistant", "content": "y" * 300},
                {"role": "user", "content": "Write a haiku"}]
    features = extract_features({"messages": messages}, "openai")
    assert classify_category(features, long_context_tokens=100).category == "long_context"
    assert classify_category(features).category == "writing"


def test_code_evidence_read_by_the_tier_classifier_decides_code() -> None:
    assert verdict(FENCED) == CategoryVerdict("code", "code", "fenced code block")
    trace = "It crashed:\nTraceback (most recent call last):\n  File \"a.py\", line 3, in <module>\nKeyError: 'x'"
    assert verdict(trace).category == "code"


def test_code_in_an_earlier_turn_counts_and_vision_comes_before_code() -> None:
    messages = [{"role": "user", "content": FENCED}, {"role": "assistant", "content": "ok"},
                {"role": "user", "content": "and now?"}]
    assert classify_category(extract_features({"messages": messages}, "openai")).category == "code"
    assert verdict([{"type": "text", "text": FENCED}, IMAGE]).category == "vision"


# (text, category): keywords of several categories in one message; the earlier category of precedence wins.
PRECEDENCE_TABLE = [
    ("Write a Python function that parses dates", "code"),
    ("Write down the integral of x squared", "math"),
    ("Write an analysis of the quarterly results", "analysis"),
    ("Prove the theorem and analyze its implications", "math"),
    ("写一段代码", "code"),
]


@pytest.mark.parametrize(("text", "category"), PRECEDENCE_TABLE)
def test_keywords_of_several_categories_go_by_precedence(text: str, category: str) -> None:
    assert verdict(text).category == category


def test_keywords_match_whole_words_and_stems_whatever_the_case() -> None:
    assert verdict("DEBUGGING this is painful").detail == "debug*"
    assert verdict("My codebook is lost").category == "general"  # "code" is a whole word, not a prefix
    assert verdict("I like pythons").category == "general"
    assert verdict("Give me the pros-and-cons").detail == "pros and cons"
    assert verdict("I love C++").detail == "c++"
    assert verdict("GRÜNDLICH: übersetze den Satz").detail == "übersetz*"


def test_math_notation_is_found_between_operands_only() -> None:
    assert verdict("what is 12 * 7?") == CategoryVerdict("math", "notation", "* between operands")
    assert verdict("if x^2 = 16, what is x").category == "math"
    assert verdict("∫ sin x dx").detail == "∫"
    for text in ("I rate it 5 stars", "Ping me at 10:30", "the C++ build", "rock+roll forever", "a = b?"):
        assert verdict(text).category != "math" or text == "a = b?", text
    assert math_notation("a = b") == "= between operands"  # one-letter variables are operands
    assert math_notation("see the README.md = docs") == ""


def test_the_math_notation_detail_never_holds_the_clients_text() -> None:
    result = verdict("my secret is 1234 + 5678")
    assert result.category == "math"
    assert "1234" not in result.detail


def test_only_the_latest_user_message_is_read_for_keywords() -> None:
    messages = [{"role": "user", "content": "Write a poem"}, {"role": "assistant", "content": "Roses..."},
                {"role": "user", "content": "thanks!"}]
    assert classify_category(extract_features({"messages": messages}, "openai")).category == "general"


def test_operator_keywords_replace_one_category_and_keep_the_others() -> None:
    overrides = (("writing", ("limerick",)),)
    assert verdict("a limerick please", keywords=overrides).category == "writing"
    assert verdict("write a poem", keywords=overrides).category == "general"  # the built-in writing list is gone
    assert verdict("fix this bug", keywords=overrides).category == "code"  # code keeps its list
    assert merged_keywords(dict(overrides))["code"] == DEFAULT_CATEGORY_KEYWORDS["code"]


def test_operator_keywords_of_any_script_are_found_in_any_text() -> None:
    overrides = (("analysis", ("*überprüf*", "検討", "évalue*")),)
    assert verdict("Bitte ÜBERPRÜFE den Vertrag", keywords=overrides).detail == "*überprüf*"
    assert verdict("この案を検討してください", keywords=overrides).detail == "検討"
    assert verdict("Évaluez ce plan", keywords=overrides).detail == "évalue*"
    assert verdict("Bitte prüfe den Vertrag", keywords=overrides).category == "general"


def test_a_keyword_listed_in_two_categories_belongs_to_the_earlier_one() -> None:
    matcher = category_matcher((("code", ("sonnet",)), ("writing", ("sonnet",))))
    assert matcher.first_match("a sonnet") == ("code", "sonnet")


def test_it_is_deterministic() -> None:
    features = extract_features(body("Compare the pros and cons of Rust and Go"), "openai")
    results = {classify_category(features) for _ in range(50)}
    assert results == {CategoryVerdict("code", "keywords", "rust")}


def test_an_empty_or_odd_body_is_general() -> None:
    assert classify_category(extract_features({}, "openai")).category == "general"
    assert classify_category(extract_features({"messages": "nope"}, "openai")).category == "general"
    assert verdict([{"type": "text", "text": ""}]).category == "general"


def test_a_forced_verdict_names_the_header() -> None:
    assert forced_verdict("math") == CategoryVerdict("math", "header", "X-GoModel-Category")


def test_every_category_is_listed_and_keyword_categories_have_default_lists() -> None:
    assert set(KEYWORD_CATEGORIES) <= set(CATEGORIES)
    assert set(DEFAULT_CATEGORY_KEYWORDS) == set(KEYWORD_CATEGORIES)
    assert len(CATEGORIES) == 7


SAMPLES = [
    "Write a poem", "step-by-step e-mail", "vor- und nachteile", "trade-offs of kpis", "I love c++ and c#",
    "$$x$$", "代码有问题", "\\frac{1}{2}", "debugging the compiler", "A tradeoff", "prosandcons",
    "Schreibe mir eine „E-Mail“", "helloworld", "xpython", "python3", "写代码python", "Einschätzung bitte",
    "„Gedicht“ über Liebe", "übersetze das", "kpis", "Was ist die Ableitung?", "研究一下", "c++x", "ac#",
    "Root-Cause analysis", "rootcause", "ROOT CAUSES", "a\tpoem", "poem_", "_poem", "poème", "naïve essay",
]


@pytest.mark.parametrize("text", SAMPLES)
def test_the_word_index_finds_what_the_tier_keyword_matcher_finds(text: str) -> None:
    keywords = [k for category in KEYWORD_CATEGORIES for k in DEFAULT_CATEGORY_KEYWORDS[category]]
    expected = KeywordMatcher(keywords).first_match(text)
    assert WordIndexMatcher(keywords).first_match_folded(text.casefold()) == expected
