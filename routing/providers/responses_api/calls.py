"""One Responses API call to any provider kind: the request, the answer and the stream, by kind.

An OpenAI-kind provider (``openai``) is called on its own Responses API (openai_responses). Every other kind,
Azure OpenAI and the OpenAI-compatible presets included, is sent the equivalent chat request through its adapter
(responses_to_chat) and its chat answer or stream is translated back (chat_to_responses, stream_to_responses), so
a new adapter serves the Responses endpoint with no work of its own. Azure OpenAI goes through chat because its
deployment URLs and API versions are what the adapter knows; its preview v1 Responses route is not used.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from routing.core.table import ModelSpec, ProviderSpec
from routing.providers import get_adapter
from routing.providers.base import ParsedResponse, ProviderRequest, join_url, load_json_body
from routing.providers.capabilities import check_capabilities, required_capabilities
from routing.providers.responses_api.inbound_request import ResponsesRequest
from routing.providers.responses_api.request_to_chat import responses_param
from routing.providers.responses_api.response_from_chat import chat_completion_to_response
from routing.providers.responses_api.stream_from_chat import ChatToResponsesStream, ResponsesEvents
from routing.providers.responses_api.upstream import (
    ResponsesPassThrough,
    answer_from_response,
    native_payload,
    public_response,
    usage_from_responses,
)
from routing.providers.streaming.translators import StreamTranslator

NATIVE_KINDS = frozenset({"openai"})


class AnsweredOutput:
    """The output items, with their ids, of the attempt that answered: what the client was given, so the stored
    turn can index them for ``item_reference``. Each attempt's parse or stream translator points it at its own
    items; the answer that is kept is the last one's (no attempt is made after an accepted one)."""

    __slots__ = ("_source",)

    def __init__(self) -> None:
        self._source: Callable[[], list[dict[str, Any]]] = list

    def follow(self, source: Callable[[], list[dict[str, Any]]]) -> None:
        self._source = source

    def items(self) -> list[dict[str, Any]]:
        return [item for item in self._source() if isinstance(item, dict)]


@dataclass(frozen=True)
class ResponsesCall:
    """What every attempt of one Responses request needs: the request, the id its answer gets, the whole
    conversation (the stored turns of ``previous_response_id``, then this request's items) and its chat body."""

    request: ResponsesRequest
    response_id: str
    created: int
    conversation: list[dict[str, Any]] = field(repr=False)
    chat: dict[str, Any] = field(repr=False)
    output: AnsweredOutput = field(default_factory=AnsweredOutput, repr=False, compare=False)

    def client_param(self, chat_param: str | None) -> str | None:
        """The client's own field for a path in the chat translation that an adapter refused."""
        return responses_param(chat_param, self.request, self.conversation)


def build_responses_request(*, provider: ProviderSpec, model: ModelSpec, call: ResponsesCall, stream: bool,
                            api_key: str, client_headers: Mapping[str, str] | None = None,
                            needs: Mapping[str, str] | None = None) -> ProviderRequest:
    """The upstream request; CapabilityError / RequestShapeError before anything is sent.

    ``client_headers`` reach a translated request as they reach a chat one (the adapter passes on the few its
    host reads); OpenAI's own API is sent none, as its chat adapter sends none. ``needs`` is what
    ``required_capabilities`` found in ``call.chat`` when the caller has it already; None scans it.
    """
    if provider.kind in NATIVE_KINDS:
        check_capabilities(model, required_capabilities("openai", call.chat) if needs is None else needs)
        payload = native_payload(call.request.body, upstream_model=model.upstream, conversation=call.conversation,
                                 stream=stream)
        headers = {"Authorization": f"Bearer {api_key}", "Content-Type": "application/json"}
        return ProviderRequest("POST", join_url(provider.base_url, "/responses"), headers, payload)
    return get_adapter(provider.kind).build_request(provider=provider, model=model, body=call.chat,
                                                    inbound="openai", stream=stream, api_key=api_key,
                                                    client_headers=client_headers, needs=needs)


def parse_responses_answer(*, kind: str, status: int, data: bytes, public_model: str,
                           call: ResponsesCall) -> ParsedResponse:
    """A 2xx upstream body as the client's Response object, with its Answer and Usage; MalformedResponse."""
    request = call.request
    if kind in NATIVE_KINDS:
        response = load_json_body(data)
        answer = answer_from_response(response)
        client_body = public_response(response, response_id=call.response_id, public_model=public_model,
                                      store=request.store, previous_response_id=request.previous_response_id)
        _follow_output(call, client_body)
        return ParsedResponse(client_body, answer, usage_from_responses(response.get("usage")))
    parsed = get_adapter(kind).parse_response(status=status, data=data, inbound="openai", public_model=public_model,
                                              created=call.created)
    client_body = chat_completion_to_response(parsed.client_body, request=request, response_id=call.response_id,
                                              public_model=public_model, created=call.created)
    _follow_output(call, client_body)
    return ParsedResponse(client_body, parsed.answer, parsed.usage)


def _follow_output(call: ResponsesCall, client_body: dict[str, Any]) -> None:
    output = client_body.get("output")
    items = output if isinstance(output, list) else []
    call.output.follow(lambda: items)


def responses_stream_translator(*, kind: str, public_model: str, call: ResponsesCall) -> StreamTranslator:
    """A fresh translator from the provider's stream to Responses events, for one attempt."""
    events = ResponsesEvents(request=call.request, response_id=call.response_id, public_model=public_model,
                             created=call.created)
    translator: ResponsesPassThrough | ChatToResponsesStream
    if kind in NATIVE_KINDS:
        translator = ResponsesPassThrough(events)
    else:
        inner = get_adapter(kind).stream_translator(inbound="openai", public_model=public_model,
                                                    client_wants_usage=True, created=call.created)
        translator = ChatToResponsesStream(inner, events)
    call.output.follow(lambda: translator.output_items)
    return translator
