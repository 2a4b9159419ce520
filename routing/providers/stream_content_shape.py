"""The cheap path for content deltas: recognise an event by the bytes around its text.

A stream repeats one event shape for every content chunk; only the text changes. OpenAI's::

    data: {"id":"chatcmpl-1","object":"chat.completion.chunk",...,"choices":[{"index":0,"delta":{"content":
    "Hello"},"logprobs":null,"finish_reason":null}]}

and Anthropic's ``content_block_delta`` with a ``text_delta``. Decoding each with ``json.loads`` was half the
gateway's CPU for a stream. Once one such event was decoded in full and found to be a plain content delta
(the decoder decides: for OpenAI one choice, index 0, a delta holding only ``content``, no finish reason,
usage or error), the bytes before and after its text are kept. A later event with exactly those bytes
around one JSON string is the same JSON with another text: checking the string with the JSON scanner's own
``scanstring`` validates the whole event, and the text is all there is to read from it. Any other event
(the first, the last, the usage chunk, one whose id or fingerprint changed) is decoded in full.
"""

from __future__ import annotations

from json.decoder import scanstring


class ContentShape:
    """The bytes around the text of a plain content delta, learned from one decoded event."""

    __slots__ = ("head", "tail", "_head_len", "_tail_len")

    def __init__(self, head: bytes, tail: bytes) -> None:
        self.head = head  # up to the text's opening quote
        self.tail = tail  # from just after its closing quote
        self._head_len = len(head)
        self._tail_len = len(tail)

    @classmethod
    def learn(cls, raw: bytes, member: bytes, text: str) -> ContentShape | None:
        """The shape of ``raw``, an event whose full decode found a plain content delta holding ``text`` as
        the value of ``member`` (the bytes just before the string, e.g. ``"delta":{"content":``); None if
        that member is not found exactly once.

        Such a member cannot occur inside a JSON string (its quotes would be escaped), so where it occurs
        once it is the one the full decode read.
        """
        if raw.count(member) != 1:
            return None
        start = raw.index(member) + len(member)
        try:
            rest = raw[start:].decode("utf-8")
            value, end = scanstring(rest, 1) if rest[:1] == '"' else (None, 0)
        except (UnicodeDecodeError, ValueError):
            return None
        if value != text:
            return None  # spaces before the string, say: no shape, every event decoded in full
        return cls(raw[:start], rest[end:].encode("utf-8"))

    def text_of(self, raw: bytes) -> str | None:
        """The text of ``raw`` if it has this shape, else None (the event must be decoded in full)."""
        end = len(raw) - self._tail_len
        if end <= self._head_len or not raw.startswith(self.head) or not raw.endswith(self.tail):
            return None
        try:
            literal = raw[self._head_len : end].decode("utf-8")
            text, after = scanstring(literal, 1) if literal[0] == '"' else ("", -1)
        except (UnicodeDecodeError, ValueError):
            return None
        # The string must fill the gap exactly. scanstring also rejects raw control characters, as
        # json.loads does.
        return text if after == len(literal) else None
