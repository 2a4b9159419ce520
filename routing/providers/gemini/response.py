"""Gemini generateContent responses -> OpenAI chat completions (and, through them, Anthropic messages)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from routing.core.answer import FINISH_CONTENT_FILTER, Answer
from routing.providers.common.finish_reasons import finish_from_gemini
from routing.providers.common.shape import int_or
from routing.providers.common.tool_call_ids import new_tool_call_id
from routing.providers.common.usage import usage_from_gemini
from routing.providers.errors import MalformedResponse
from routing.providers.pivot.chat_completion import (
    answer_from_openai,
    assistant_message,
    chat_completion,
    completion_choice,
)


@dataclasses.dataclass(slots=True)
class CandidateParts:
    """What one candidate (or one streamed piece of it) says."""

    text: str = ""
    reasoning: str = ""
    tool_calls: list[dict[str, Any]] = dataclasses.field(default_factory=list)


def candidate_parts(candidate: dict[str, Any]) -> CandidateParts:
    """Text, thought text and function calls of a candidate, function calls in OpenAI's tool call shape."""
    result = CandidateParts()
    content = candidate.get("content")
    parts = content.get("parts") if isinstance(content, dict) else None
    texts: list[str] = []
    thoughts: list[str] = []
    for part in parts if isinstance(parts, list) else ():
        if not isinstance(part, dict):
            continue
        call = part.get("functionCall")
        if isinstance(call, dict):
            signature = part.get("thoughtSignature")
            result.tool_calls.append(
                {
                    "id": new_tool_call_id(signature if isinstance(signature, str) else None),
                    "type": "function",
                    "function": {
                        "name": str(call.get("name") or ""),
                        "arguments": json.dumps(call.get("args") or {}, ensure_ascii=False),
                    },
                }
            )
        elif isinstance(part.get("text"), str):
            (thoughts if part.get("thought") else texts).append(part["text"])
    result.text = "".join(texts)
    result.reasoning = "".join(thoughts)
    return result


def gemini_to_openai_completion(data: Any, *, public_model: str, created: int) -> tuple[dict[str, Any], Answer]:
    """The chat completion equivalent to a Gemini response, and the first candidate's Answer.

    The Answer keeps Gemini's own verdict: a MALFORMED_FUNCTION_CALL is ``unknown`` there, though the
    client, whose SDK knows no such word, sees ``stop``.
    """
    if not isinstance(data, dict):
        raise MalformedResponse("the upstream response is not a JSON object")
    candidates = data.get("candidates")
    choices: list[dict[str, Any]] = []
    first_finish: str | None = None
    for position, candidate in enumerate(candidates if isinstance(candidates, list) else ()):
        if not isinstance(candidate, dict):
            raise MalformedResponse("a Gemini candidate is not an object")
        parts = candidate_parts(candidate)
        finish = finish_from_gemini(candidate.get("finishReason"), has_tool_calls=bool(parts.tool_calls))
        message = assistant_message(parts.text, parts.reasoning or None, parts.tool_calls)
        choices.append(completion_choice(message, finish, index=int_or(candidate.get("index"), position)))
        if first_finish is None:
            first_finish = finish
    if not choices:
        feedback = data.get("promptFeedback")
        if not (isinstance(feedback, dict) and feedback.get("blockReason")):
            raise MalformedResponse("the upstream response has no candidates")
        # The prompt itself was blocked: an empty answer stopped by the content filter.
        choices.append(completion_choice(assistant_message("", None, []), FINISH_CONTENT_FILTER))
        first_finish = FINISH_CONTENT_FILTER
    body = chat_completion(upstream_id=data.get("responseId"), created=created, model=public_model, choices=choices,
                           usage=usage_from_gemini(data.get("usageMetadata")))
    answer = dataclasses.replace(answer_from_openai(body), finish_reason=first_finish or FINISH_CONTENT_FILTER)
    return body, answer
