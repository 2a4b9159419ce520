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

Several such events in a row (an instant provider's whole answer arrives in one read) are read as one run
(``read_run``, ``texts_of_run``): each event is only checked to be the head, a quoted literal and the tail,
and one scan of all the literals as a JSON array validates and reads every text at once, a handful of steps
per event instead of a few dozen (no event tuple, no decoded data, no frame built per event).
"""

from __future__ import annotations

from json.decoder import scanstring

import orjson

_DATA = b"data: "
_BLANK = b"\n\n"
_DATA_LEN, _BLANK_LEN = len(_DATA), len(_BLANK)
_SEPARATOR = _BLANK + _DATA  # where one event of a run ends and the next begins


class ContentShape:
    """The bytes around the text of a plain content delta, learned from one decoded event."""

    __slots__ = ("head", "tail", "run_bytes", "_head_len", "_tail_len", "_opening", "_closing", "_between",
                 "_followed", "_one_line")

    def __init__(self, head: bytes, tail: bytes) -> None:
        self.head = head  # up to the text's opening quote
        self.tail = tail  # from just after its closing quote
        self._head_len = len(head)
        self._tail_len = len(tail)
        self._opening = head + b'"'  # a run's events: the head and the literal's quotes, then the tail
        self._closing = b'"' + tail
        self._between = self._closing + self._opening  # what lies between two literals of a run
        self._followed = self._closing + _DATA  # the end of such an event where another event follows
        # An OpenAI event: one "data: " line. Runs of other events are read event by event.
        self._one_line = head.startswith(_DATA) and tail.endswith(_BLANK) and b"\n" not in head + tail[:-2]
        self.run_bytes = 2 * (self._head_len + self._tail_len + 2)  # the least a run of two events takes

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

    def read_run(self, buf: bytearray, pos: int) -> tuple[int, list[bytearray]]:
        """The end of the run of whole events of this shape that starts at ``pos`` in ``buf``, and what is
        between the quotes of each event's literal (``pos`` and none if fewer than two such events start
        there: one alone is read more cheaply by ``text_of``).

        Only for events split on blank lines (``SSEParser`` without ``\\r``), where an event ends at its first
        blank line: there the tail must end. The literals are checked together by ``texts_of_run``.

        The run is cut out in a few calls, not a few per event: it ends at the last event with this tail that
        another event follows (or that ends the buffer), and is split where one event ends and the next
        begins (a short separator, which CPython finds several times faster than the tail). Cutting the head
        and the tail off each piece and joining what is left with the bytes that lie between two literals
        must give the run back: then every event is the head, a literal and the tail. Anything else in
        between, say another kind of event, fails that check, and the run is read event by event."""
        opening = self._opening
        opening_len, closing_len = self._head_len + 1, self._tail_len + 1
        if buf[pos : pos + opening_len] != opening:
            return pos, []
        if not self._one_line:
            return self._read_run_by_event(buf, pos)
        if buf.endswith(self._closing):
            end = len(buf)
        else:
            end = buf.rfind(self._followed, pos)
            if end < 0:
                return pos, []
            end += closing_len
        # Each event with its "data: " and its blank line left off.
        pieces = buf[pos + _DATA_LEN : end - _BLANK_LEN].split(_SEPARATOR)
        if len(pieces) < 2:
            return pos, []
        head_len, tail_len = opening_len - _DATA_LEN, closing_len - _BLANK_LEN
        insides = [piece[head_len:-tail_len] for piece in pieces]
        if self._between.join(insides) != buf[pos + opening_len : end - closing_len]:
            return self._read_run_by_event(buf, pos)
        return end, insides

    def _read_run_by_event(self, buf: bytearray, pos: int) -> tuple[int, list[bytearray]]:
        """``read_run`` for a stretch that holds something else between events of this shape: the run that
        starts at ``pos``, event by event."""
        opening, closing = self._opening, self._closing
        start = pos
        find = buf.find
        head_len, tail_len = self._head_len, self._tail_len
        insides: list[bytearray] = []
        while True:
            end = find(b"\n\n", pos + head_len) + 2
            if end < 2 or not buf.startswith(closing, end - tail_len - 1):
                break
            insides.append(buf[pos + head_len + 1 : end - tail_len - 1])
            pos = end
            if not buf.startswith(opening, pos):
                break
        return (pos, insides) if len(insides) > 1 else (start, [])

    def frames_of_run(self, insides: list[bytes] | list[bytearray], head: bytes, tail: bytes) -> bytes:
        """The run's events again, with ``head`` and ``tail`` around each literal."""
        return head + b'"' + (b'"' + tail + head + b'"').join(insides) + b'"' + tail

    @staticmethod
    def texts_of_run(insides: list[bytes] | list[bytearray]) -> list[str] | None:
        """The texts of a run's literals (what is between their quotes); None if one is not a JSON string on
        its own (then each event is decoded on its own, for its exact verdict).

        One scan reads them as a JSON array. They are joined with a line end, which JSON allows between
        values and forbids inside a string, so no string can reach into the next literal: with as many
        strings as literals, each literal is exactly one string. (No line end inside one either: each event
        of the run is one event of the stream.)"""
        try:  # orjson checks the UTF-8 too; what it refuses (a lone surrogate escape) is read event by event
            texts = orjson.loads(b'["' + b'",\n"'.join(insides) + b'"]')
        except orjson.JSONDecodeError:
            return None
        return texts if len(texts) == len(insides) else None
