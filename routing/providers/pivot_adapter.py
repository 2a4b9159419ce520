"""The adapter of a format both client shapes reach through OpenAI's chat completion (Gemini, Cohere, Bedrock).

An Anthropic client's body is made an OpenAI one first (anthropic_to_openai), and the format's answers and
streams, once they are OpenAI's, are made Anthropic's for that client. A format gives only its own three
translations: an OpenAI body to its request, its answer to a chat completion, its stream to OpenAI chunks.
"""

from __future__ import annotations

from typing import Any

from routing.core.answer import Answer, Usage
from routing.core.table import ModelSpec
from routing.providers.anthropic.inbound_request import anthropic_to_openai
from routing.providers.anthropic.inbound_response import openai_to_anthropic_message
from routing.providers.anthropic.inbound_stream import AnthropicEventEncoder
from routing.providers.base import Adapter, ParsedResponse
from routing.providers.errors import Inbound
from routing.providers.streaming.decoding import ChunkDecoder
from routing.providers.streaming.encoding import OpenAIFrameEncoder
from routing.providers.streaming.translators import EventParser, StreamTranslator, TranslatingStream


class PivotAdapter(Adapter):
    """An adapter that translates every client shape through OpenAI's; subclasses give the format's side."""

    def payload(self, *, model: ModelSpec, body: dict[str, Any], inbound: Inbound, stream: bool) -> dict[str, Any]:
        pivot = anthropic_to_openai(body, model=model) if inbound == "anthropic" else body
        return self.request_from_openai(pivot, model=model, stream=stream)

    def translate_response(self, data: Any, *, inbound: Inbound, public_model: str, created: int) -> ParsedResponse:
        body, answer, usage = self.completion_of(data, public_model=public_model, created=created)
        if inbound == "anthropic":
            return ParsedResponse(openai_to_anthropic_message(body, public_model=public_model), answer, usage)
        return ParsedResponse(body, answer, usage)

    def translator(
        self, *, inbound: Inbound, public_model: str, client_wants_usage: bool, created: int
    ) -> StreamTranslator:
        encoder: OpenAIFrameEncoder | AnthropicEventEncoder = (
            AnthropicEventEncoder(public_model=public_model)
            if inbound == "anthropic"
            else OpenAIFrameEncoder(client_wants_usage=client_wants_usage)
        )
        return TranslatingStream(
            inbound=inbound, decoder=self.stream_decoder(public_model=public_model, created=created), encoder=encoder,
            parser=self.stream_parser(),
        )

    # What each format fills in.

    def request_from_openai(self, body: dict[str, Any], *, model: ModelSpec, stream: bool) -> dict[str, Any]:
        """The format's request body for an OpenAI chat body."""
        raise NotImplementedError

    def completion_of(self, data: Any, *, public_model: str, created: int) -> tuple[dict[str, Any], Answer, Usage]:
        """The chat completion equivalent to the format's answer, its Answer and its Usage."""
        raise NotImplementedError

    def stream_decoder(self, *, public_model: str, created: int) -> ChunkDecoder:
        """A fresh decoder of the format's stream events into OpenAI chunks."""
        raise NotImplementedError

    def stream_parser(self) -> EventParser | None:
        """The stream's framing: None for server-sent events."""
        return None
