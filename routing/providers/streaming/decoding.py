"""Upstream stream events -> OpenAI chunk dicts: the common part and the OpenAI decoder itself.

A decoder turns each SSE event of one provider format into zero or more OpenAI ``chat.completion.chunk``
dicts (the pivot), and notes whether the upstream ended properly (``complete``) or reported an error in
the stream (``failure``). The usage chunk, where a format reports usage apart from content, comes out of
``final_chunks()`` at the end, so it is the last chunk as OpenAI clients expect.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import orjson

from routing.core.answer import Usage
from routing.providers.errors import MalformedResponse
from routing.providers.streaming.content_shape import ContentShape
from routing.providers.streaming.sse import SSEEvent


@dataclass(frozen=True, slots=True)
class StreamFailure:
    """An error the upstream reported inside a stream that had already started."""

    error_type: str
    message: str


def load_event_json(event: SSEEvent) -> dict[str, Any]:
    """The JSON object in an event's data, or MalformedResponse.

    orjson reads the common event in half the time of the json module. It accepts only strict JSON, a subset
    of what json reads: anything it refuses (NaN, a lone surrogate escape, nesting past 1,024 levels) or that
    is not an object takes json.loads for its exact verdict. The one value they read differently: an
    integer past 64 bits is a float to orjson (token counts that large are not real ones)."""
    data = event.data or ""
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError:
        value = None
    if type(value) is dict:
        return value
    try:
        value = json.loads(data)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise MalformedResponse("the upstream stream sent an event that is not JSON") from exc
    if not isinstance(value, dict):
        raise MalformedResponse("the upstream stream sent an event that is not a JSON object")
    return value


def failure_from_error(error: Any) -> StreamFailure:
    """A StreamFailure from an error object in any of the three formats."""
    if isinstance(error, dict):
        error_type = error.get("type") or error.get("status") or "api_error"
        message = error.get("message") or "the upstream reported an error mid-stream"
        return StreamFailure(str(error_type), str(message))
    return StreamFailure("api_error", str(error) if error else "the upstream reported an error mid-stream")


class ChunkDecoder:
    """Base of the decoders: chunk construction and the end-of-stream state."""

    def __init__(self, *, public_model: str, created: int) -> None:
        self.public_model = public_model
        self.created = created
        self.response_id = ""
        self.done = False  # the upstream's explicit end marker arrived
        self.failure: StreamFailure | None = None
        self.finish_override: str | None = None  # normalised finish reason, where the format says more

    @property
    def complete(self) -> bool:
        """The upstream ended properly: finishing the client's stream normally is right."""
        return self.done

    def decode(self, event: SSEEvent) -> list[dict[str, Any]]:
        raise NotImplementedError

    def content_text(self, raw: bytes) -> str | None:
        """The text of a plain content delta read by the cheap path, or None: then ``decode`` the event.
        A text read here stands for the whole event (see stream_content_shape)."""
        return None

    def final_chunks(self) -> list[dict[str, Any]]:
        """Chunks owed at the end of a complete stream (the usage chunk)."""
        return []

    def partial_usage(self) -> Usage | None:
        """What is known of the usage so far, for a stream cut before its usage chunk."""
        return None

    def chunk(
        self, delta: dict[str, Any] | None = None, *, finish: str | None = None, index: int = 0
    ) -> dict[str, Any]:
        return {
            "id": self.response_id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.public_model,
            "choices": [{"index": index, "delta": delta or {}, "finish_reason": finish, "logprobs": None}],
        }

    def usage_chunk(self, usage: dict[str, Any]) -> dict[str, Any]:
        return {
            "id": self.response_id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.public_model,
            "choices": [],
            "usage": usage,
        }


class OpenAIChunkDecoder(ChunkDecoder):
    """OpenAI's own stream: each data event already is a chunk; ``[DONE]`` ends it.

    A stream whose choice 0 got its finish reason counts as complete even if ``[DONE]`` never came (some
    compatible servers omit it): the answer is whole, and the client is sent its ``[DONE]``.
    """

    def __init__(self, *, public_model: str = "", created: int = 0) -> None:
        super().__init__(public_model=public_model, created=created)
        self.finish_seen = False
        self.shape: ContentShape | None = None  # learned from the first plain content delta

    def content_text(self, raw: bytes) -> str | None:
        shape = self.shape
        return None if shape is None else shape.text_of(raw)

    @property
    def complete(self) -> bool:
        return self.done or self.finish_seen

    def decode(self, event: SSEEvent) -> list[dict[str, Any]]:
        data = event.data
        if data is None:
            return []
        if data == "[DONE]" or (len(data) < 16 and data.strip() == "[DONE]"):
            self.done = True
            return []
        try:  # load_event_json's fast path, inline: this runs for every event read in full
            chunk = orjson.loads(data)
        except orjson.JSONDecodeError:
            chunk = None
        if type(chunk) is not dict:
            chunk = load_event_json(event)
        if "error" in chunk and chunk["error"]:
            self.failure = failure_from_error(chunk["error"])
            return []
        if not self.finish_seen:
            choices = chunk.get("choices")
            if type(choices) is list:
                for choice in choices:
                    if type(choice) is dict and choice.get("finish_reason") and choice.get("index", 0) == 0:
                        self.finish_seen = True
        if self.shape is None:
            text = _plain_content(chunk)
            if text is not None:
                self.shape = ContentShape.learn(event.raw, b'"delta":{"content":', text)
        return [chunk]


def _plain_content(chunk: dict[str, Any]) -> str | None:
    """The text of a chunk that is a content delta of choice 0 and nothing else (no finish reason, usage
    or error), else None."""
    choices = chunk.get("choices")
    if (type(choices) is not list or len(choices) != 1 or chunk.get("usage") is not None
            or "x_groq" in chunk or "error" in chunk):
        return None
    choice = choices[0]
    if type(choice) is not dict or choice.get("index", 0) != 0 or choice.get("finish_reason"):
        return None
    delta = choice.get("delta")
    if type(delta) is not dict or len(delta) != 1:
        return None
    text = delta.get("content")
    return text if type(text) is str else None
