"""Stream translators: upstream SSE bytes in, the client's SSE frames out, answer and usage accumulated.

How the engine drives one::

    translator = adapter.stream_translator(inbound=..., public_model=..., client_wants_usage=...)
    for chunk in upstream:                  # any chunk boundaries
        write(translator.feed(chunk))       # complete client frames; the first one is the first byte
    write(translator.finish())              # at upstream EOF: flushes; closing frames if complete
    if not translator.complete:             # cut short, or translator.failure reported by the upstream
        write(translator.error_frames("api_error", "the upstream stream ended early"))
    translator.usage, translator.answer     # for cost and validation

``feed`` raises MalformedResponse on a stream it cannot read. After an upstream error event
(``failure``) the rest of the upstream stream is ignored.

Three shapes: same format in and out forwards each event's original bytes (JSON is parsed only to
accumulate; the model name is rewritten to the public one); other pairs decode to OpenAI chunks and
encode those for the client. A content delta shaped like the previous one is read from its text alone
(``stream_content_shape``), and the frames of one upstream read go out as one piece (the engine joins them).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from functools import lru_cache
from typing import Protocol

from routing.core.answer import Answer, Usage
from routing.providers.anthropic.inbound_stream import AnthropicEventEncoder
from routing.providers.anthropic.upstream_stream import AnthropicEventDecoder
from routing.providers.errors import Inbound
from routing.providers.streaming.accumulator import ChunkAccumulator
from routing.providers.streaming.content_shape import ContentShape
from routing.providers.streaming.decoding import ChunkDecoder, OpenAIChunkDecoder, StreamFailure
from routing.providers.streaming.encoding import OpenAIFrameEncoder, stream_error_frames
from routing.providers.streaming.sse import DONE_FRAME, SSEEvent, SSEParser

# The value of a "model" member. A "model" inside a JSON string has escaped quotes, so the first
# '"model"' in an event is the member itself.
_MODEL_VALUE = re.compile(rb'"model"\s*:\s*"(?:[^"\\]|\\.)*"')


# A read shorter than this holds no run of content deltas worth reading in bulk (two OpenAI content chunks
# take ~500 bytes).
_RUN_READ_BYTES = 512


@lru_cache(maxsize=1024)
def _model_member(public_model: str) -> bytes:
    """The JSON member naming the public model, made once per model rather than once per stream."""
    return b'"model":' + json.dumps(public_model).encode()


def _with_model(raw: bytes, member: bytes) -> bytes:
    """``raw`` with its first ``"model": "..."`` member replaced by ``member``."""
    start = raw.find(b'"model"')
    if start < 0:
        return raw
    match = _MODEL_VALUE.match(raw, start)
    return raw[:start] + member + raw[match.end() :] if match else raw


class EventParser(Protocol):
    """What splits upstream bytes into events: SSE for most formats; a format with its own framing (Bedrock's
    binary event stream, routing.providers.bedrock.eventstream) hands its translator a parser of its own."""

    def feed(self, chunk: bytes) -> list[SSEEvent]: ...

    def flush(self) -> list[SSEEvent]: ...


class StreamTranslator:
    """The engine's view of a stream; see the module docstring for the calling sequence."""

    def __init__(self, *, inbound: Inbound, decoder: ChunkDecoder, parser: EventParser | None = None) -> None:
        self.inbound = inbound
        self._decoder = decoder
        self._parser: EventParser = parser if parser is not None else SSEParser()
        self._accumulator = ChunkAccumulator()

    @property
    def complete(self) -> bool:
        """The upstream ended properly and reported no error."""
        return self._decoder.complete and self._decoder.failure is None

    @property
    def ended(self) -> bool:
        """The upstream's own end marker arrived and no error: nothing the answer or its usage needs is still to
        come. (``complete`` can be true earlier: an OpenAI stream with a finish reason, before its usage chunk.)"""
        return self._decoder.done and self._decoder.failure is None

    @property
    def failure(self) -> StreamFailure | None:
        """The error the upstream reported mid-stream, if any."""
        return self._decoder.failure

    @property
    def usage(self) -> Usage:
        return self._accumulator.usage or self._decoder.partial_usage() or Usage()

    @property
    def answer(self) -> Answer:
        return self._accumulator.answer(self._decoder.finish_override)

    @property
    def has_content(self) -> bool:
        """Text, a tool call or reasoning arrived, or the stream is complete: a stream's first frames wait for
        this (``answer`` would say the same, at the cost of building it after every read)."""
        return self._accumulator.has_content() or self.complete

    def feed(self, chunk: bytes) -> list[bytes]:
        """Client frames completed by this chunk of upstream bytes."""
        return self._events(self._parser.feed(chunk))

    def finish(self) -> list[bytes]:
        """At upstream EOF: frames of a last unterminated event, then the closing frames if ``complete``."""
        events = self._parser.flush()
        frames = self._events(events) if events else []
        if self.complete:
            frames += self._closing_frames()
        return frames

    def error_frames(self, error_type: str, message: str) -> list[bytes]:
        """A well-formed error event in the client's format, to end a stream that failed."""
        return stream_error_frames(self.inbound, error_type, message)

    def _events(self, events: list[SSEEvent]) -> list[bytes]:
        raise NotImplementedError

    def _closing_frames(self) -> list[bytes]:
        raise NotImplementedError


class OpenAIPassThrough(StreamTranslator):
    """OpenAI-format upstream to an OpenAI client: original bytes, minus the usage-only chunk that the
    gateway asked for on its own account, plus ``[DONE]`` if a compatible server forgot it."""

    def __init__(self, *, public_model: str, client_wants_usage: bool) -> None:
        self._openai = OpenAIChunkDecoder()
        self._sse = SSEParser()
        super().__init__(inbound="openai", decoder=self._openai, parser=self._sse)
        self._client_wants_usage = client_wants_usage
        self._model_member = _model_member(public_model)
        self._upstream_member = b""  # the upstream's own model member, once seen: spliced without a regex
        self._public_shape: ContentShape | None = None  # the content shape whose head and tail were rewritten...
        self._public_head = b""  # ...into these: with the public model name (the head has it, or else the tail)
        self._public_tail = b""

    def feed(self, chunk: bytes) -> list[bytes]:
        shape = self._openai.shape
        if len(chunk) < (_RUN_READ_BYTES if shape is None else shape.run_bytes) or self._openai.failure is not None:
            return self._events(self._parser.feed(chunk))  # too short for a run: a paced provider's one event, say
        # A run of content deltas like the last one goes through in bulk (stream_content_shape): tried where
        # this read starts and after each event read on its own.
        parser = self._sse
        events = parser.events(chunk)
        frames = self._runs(parser, shape) if shape is not None else []
        return self._events(events, frames, parser)

    def _events(self, events: Iterable[SSEEvent], frames: list[bytes] | None = None,
                parser: SSEParser | None = None) -> list[bytes]:
        # The gateway's commonest stream runs this once per upstream read: names are bound locally.
        if frames is None:
            frames = []
        openai = self._openai
        decode = openai.decode
        add = self._accumulator.add
        drop_usage_only = not self._client_wants_usage
        add_text = self._accumulator.add_text
        for event in events:
            if openai.failure is not None:
                break
            if event.data is None:
                continue  # comments and keep-alives: the gateway's own stream needs none of them
            shape = openai.shape
            if shape is not None:
                raw = event.raw
                text = shape.text_of(raw)
                if text is not None:  # a content delta like the last: only its text is new
                    add_text(text)
                    if self._public_shape is not shape:
                        self._rewrite(shape)
                    # The model member sits before the text (OpenAI's order) or, rarely, after it.
                    head = self._public_head
                    frames.append(head + raw[len(shape.head) :] if head is not shape.head else self._public(raw))
                    continue
            chunks = decode(event)
            if not chunks:
                if openai.done:
                    frames.append(event.raw)
                continue
            chunk = chunks[0]
            add(chunk)
            if drop_usage_only and chunk.get("usage") and not chunk.get("choices"):
                continue
            frames.append(self._public(event.raw))
            if parser is not None and openai.shape is not None:
                frames += self._runs(parser, openai.shape)
        return frames

    def _runs(self, parser: SSEParser, shape: ContentShape) -> list[bytes]:
        """The client frames of the run of content deltas of ``shape`` that comes next in ``parser``, if any."""
        insides = parser.take_run(shape.read_run)
        if not insides:
            return []
        texts = shape.texts_of_run(insides)
        if texts is None:  # each event on its own: its exact verdict, or its text
            return self._events(SSEParser().feed(shape.frames_of_run(insides, shape.head, shape.tail)))
        self._accumulator.add_texts(texts)
        if self._public_shape is not shape:
            self._rewrite(shape)
        return [shape.frames_of_run(insides, self._public_head, self._public_tail)]

    def _rewrite(self, shape: ContentShape) -> None:
        self._public_shape, self._public_head = shape, self._public(shape.head)
        # No model member before the text: the first one, if any, is after it (a literal holds none).
        self._public_tail = self._public(shape.tail) if self._public_head is shape.head else shape.tail

    def _public(self, raw: bytes) -> bytes:
        """``raw`` with the public model name in place of the upstream's."""
        member = self._upstream_member
        if member:
            # The member's exact bytes cannot occur inside a JSON string (its quotes would be escaped), so
            # the first place they occur is the member. (bytes.replace returns ``raw`` itself if it has none.)
            public = raw.replace(member, self._model_member, 1)
            if public is not raw:
                return public
        start = raw.find(b'"model"')
        if start < 0:
            return raw
        match = _MODEL_VALUE.match(raw, start)
        if match is None:
            return raw
        self._upstream_member = match.group()
        return raw[:start] + self._model_member + raw[match.end() :]

    def _closing_frames(self) -> list[bytes]:
        return [] if self._openai.done else [DONE_FRAME]


class AnthropicPassThrough(StreamTranslator):
    """Anthropic upstream to an Anthropic client: original bytes; usage and answer read on the way."""

    def __init__(self, *, public_model: str) -> None:
        # The answer read on the way names the tool calls as the Anthropic client sees them.
        decoder = AnthropicEventDecoder(public_model=public_model, carry_thinking=False)
        super().__init__(inbound="anthropic", decoder=decoder)
        self._model_member = _model_member(public_model)

    def _events(self, events: list[SSEEvent]) -> list[bytes]:
        frames: list[bytes] = []
        decoder = self._decoder
        for event in events:
            if decoder.failure is not None:
                break
            if event.data is None:
                continue
            text = decoder.content_text(event.raw)
            if text is not None:  # a text_delta like the last: only its text is new
                self._accumulator.add_text(text)
                frames.append(event.raw)
                continue
            for chunk in decoder.decode(event):
                self._accumulator.add(chunk)
            if self._decoder.failure is not None:
                break  # the engine ends the client's stream with its own error event
            raw = event.raw
            if event.event == "message_start":
                raw = _with_model(raw, self._model_member)
            frames.append(raw)
        return frames

    def _closing_frames(self) -> list[bytes]:
        return []  # message_stop was forwarded as it came


class TranslatingStream(StreamTranslator):
    """Any other pair: upstream events -> OpenAI chunks -> the client's frames."""

    def __init__(
        self, *, inbound: Inbound, decoder: ChunkDecoder, encoder: OpenAIFrameEncoder | AnthropicEventEncoder,
        parser: EventParser | None = None,
    ) -> None:
        super().__init__(inbound=inbound, decoder=decoder, parser=parser)
        self._encoder = encoder

    def _events(self, events: list[SSEEvent]) -> list[bytes]:
        frames: list[bytes] = []
        decoder, encoder, accumulator = self._decoder, self._encoder, self._accumulator
        for event in events:
            if decoder.failure is not None:
                break
            text = decoder.content_text(event.raw)
            if text is not None:  # a plain content delta: its text is all there is to translate
                accumulator.add_text(text)
                if isinstance(encoder, AnthropicEventEncoder):
                    frames += encoder.encode_text(text) if encoder.takes_text else encoder.encode(
                        decoder.chunk({"content": text}))
                else:
                    frames += encoder.encode_text(text, decoder.chunk({"content": text}))
                continue
            for chunk in decoder.decode(event):
                accumulator.add(chunk)
                frames += encoder.encode(chunk)
        return frames

    def _closing_frames(self) -> list[bytes]:
        frames: list[bytes] = []
        for chunk in self._decoder.final_chunks():
            self._accumulator.add(chunk)
            frames += self._encoder.encode(chunk)
        return frames + self._encoder.close()
