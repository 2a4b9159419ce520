"""The message walk the Anthropic, Gemini, Bedrock and Cohere translators share: the same refusals, in the same
words, and one turn per run of a role where the format wants turns to alternate."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from routing.core.table import ModelSpec
from routing.providers import RequestShapeError
from routing.providers.anthropic.upstream_request import openai_to_anthropic
from routing.providers.bedrock.request import openai_to_bedrock
from routing.providers.cohere.request import openai_to_cohere
from routing.providers.gemini.request import openai_to_gemini
from tests.providers.support import ALL

Translate = Callable[..., dict[str, Any]]
TRANSLATORS: dict[str, tuple[Translate, str]] = {
    "anthropic": (openai_to_anthropic, "claude-sonnet-4-5"),
    "gemini": (openai_to_gemini, "gemini-2.5-flash"),
    "bedrock": (openai_to_bedrock, "anthropic.claude-sonnet-4-5-v1:0"),
    "cohere": (openai_to_cohere, "command-a-03-2025"),
}


def translate(kind: str, messages: list[Any]) -> dict[str, Any]:
    translator, upstream = TRANSLATORS[kind]
    model = ModelSpec(name=f"{kind}/public", provider=kind, upstream=upstream, capabilities=ALL)
    extra = {"stream": False} if kind == "cohere" else {}
    return translator({"model": "pub", "messages": messages}, model=model, **extra)


REFUSALS = [
    ([{"role": "user", "content": "hi"}, {"role": "function", "name": "f", "content": "x"}],
     "legacy function messages are not supported: use tools", "messages[1].role"),
    ([{"role": "user", "content": "hi"}, {"role": "critic", "content": "x"}],
     "unknown role 'critic'", "messages[1].role"),
    ([{"role": "user", "content": "hi"}, "not a message"], None, "messages[1]"),
]


@pytest.mark.parametrize("kind", sorted(TRANSLATORS))
@pytest.mark.parametrize(("messages", "message", "param"), REFUSALS)
def test_it_refuses_a_message_no_format_carries_in_the_same_words(kind: str, messages: list[Any],
                                                                    message: str | None, param: str) -> None:
    with pytest.raises(RequestShapeError) as caught:
        translate(kind, messages)
    assert caught.value.param == param
    if message is not None:
        assert str(caught.value) == message


@pytest.mark.parametrize("kind", ["anthropic", "bedrock"])
def test_it_merges_consecutive_user_messages_into_one_turn(kind: str) -> None:
    body = translate(kind, [{"role": "developer", "content": "Be brief."}, {"role": "user", "content": "one"},
                            {"role": "user", "content": "two"}])
    assert [turn["role"] for turn in body["messages"]] == ["user"]
    assert len(body["messages"][0]["content"]) == 2


def test_it_merges_consecutive_user_messages_into_one_gemini_turn() -> None:
    body = translate("gemini", [{"role": "user", "content": "one"}, {"role": "user", "content": "two"}])
    assert body["contents"] == [{"role": "user", "parts": [{"text": "one"}, {"text": "two"}]}]
    assert "systemInstruction" not in body
