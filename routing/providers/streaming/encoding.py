"""OpenAI chunks -> OpenAI data events for an OpenAI client, and the error event that ends a stream which failed
mid-way in either client protocol (an Anthropic client's events: routing.providers.anthropic.inbound_stream).
"""

from __future__ import annotations

from typing import Any

from routing.providers.errors import Inbound
from routing.providers.streaming.sse import DONE_FRAME, compact_json, data_frame, event_frame


def stream_error_frames(inbound: Inbound, error_type: str, message: str) -> list[bytes]:
    """The frames that end a failed stream in the client's format.

    OpenAI: a data event with an ``error`` object (the openai SDK raises APIError on it) and no
    ``[DONE]``, which would announce a normal end. Anthropic: ``event: error`` as its API sends it.
    """
    if inbound == "anthropic":
        return [event_frame("error", {"type": "error", "error": {"type": error_type, "message": message}})]
    return [data_frame({"error": {"message": message, "type": error_type, "param": None, "code": None}})]


class OpenAIFrameEncoder:
    """Chunks as OpenAI data events; the usage-only chunk only for a client that asked for it."""

    def __init__(self, *, client_wants_usage: bool) -> None:
        self.client_wants_usage = client_wants_usage
        self._text_frame_of: dict[str, Any] | None = None  # the content chunk the two parts below came from
        self._text_frame_parts: tuple[bytes, bytes] | None = None

    def encode(self, chunk: dict[str, Any]) -> list[bytes]:
        if not self.client_wants_usage and "usage" in chunk and not chunk.get("choices"):
            return []
        return [data_frame(chunk)]

    def encode_text(self, text: str, chunk: dict[str, Any]) -> list[bytes]:
        """What ``encode(chunk)`` writes for ``chunk``, one choice whose delta is ``{"content": text}``: the
        frame of the previous such chunk with the new text spliced in, when all else is equal (within one
        stream it is), so that only the text is encoded."""
        choices = chunk.get("choices")
        if (type(choices) is not list or len(choices) != 1 or type(choices[0]) is not dict
                or choices[0].get("delta") != {"content": text}):
            return self.encode(chunk)
        probe = {**chunk, "choices": [{**choices[0], "delta": {"content": "\x00"}}]}
        if probe != self._text_frame_of:
            self._text_frame_of, self._text_frame_parts = probe, None
            frame = data_frame(probe)
            if frame.count(b'"\\u0000"') == 1:  # the marker text occurs nowhere else: split around it
                before, after = frame.split(b'"\\u0000"')
                self._text_frame_parts = (before, after)
        parts = self._text_frame_parts
        if parts is None:
            return self.encode(chunk)
        return [parts[0] + compact_json(text).encode() + parts[1]]

    def close(self) -> list[bytes]:
        return [DONE_FRAME]
