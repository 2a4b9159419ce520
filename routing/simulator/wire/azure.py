"""Azure OpenAI (``POST /openai/deployments/{deployment}/chat/completions?api-version=...``).

The body is OpenAI's; what differs is the key header (``api-key``), the mandatory ``api-version``, the
content-filter annotations (including the stream's first chunk with an empty ``choices`` list and empty
``id``, which trips naive parsers) and the ``{"error": {"code", "message"}}`` envelope of Azure's own
errors. Validation errors that come from the model service keep OpenAI's envelope, as on Azure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from routing.simulator.wire.base import (
    CONTEXT_OVERFLOW,
    INVALID_JSON,
    INVALID_KEY,
    INVALID_REQUEST,
    MISSING_KEY,
    MODEL_NOT_FOUND,
    PERMISSION,
    QUOTA,
    RATE_LIMIT,
    UNKNOWN_PATH,
    ErrorReply,
    Headers,
    Problem,
    RenderContext,
    dumps,
    sse_data,
)
from routing.simulator.wire.openai import OpenAIWire

API_VERSION_EXAMPLE = "2024-10-21"
_SAFE = {"filtered": False, "severity": "safe"}
_FILTER_RESULTS = {"hate": _SAFE, "self_harm": _SAFE, "sexual": _SAFE, "violence": _SAFE}
_PROMPT_FILTER_RESULTS = [{"prompt_index": 0, "content_filter_results": _FILTER_RESULTS}]
_UNAVAILABLE = "The service is temporarily unable to process your request. Please try again later."
_ACCESS_DENIED = (
    "Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a valid key "
    "for an active subscription and use a correct regional API endpoint for your resource."
)


class AzureWire(OpenAIWire):
    name = "azure"
    requires_key = True

    def credentials(self, headers: Mapping[str, str], query: Mapping[str, str]) -> tuple[str | None, str | None]:
        if headers.get("api-key"):
            return "api-key", headers["api-key"]
        authorization = headers.get("authorization", "")
        if authorization[:7].lower() == "bearer " and authorization[7:].strip():
            return "authorization", authorization[7:].strip()
        return None, None

    def precheck(self, headers: Mapping[str, str], query: Mapping[str, str], model: str) -> Problem | None:
        if not query.get("api-version"):
            return Problem(UNKNOWN_PATH, 404, model=model)
        return None

    def _decorate_choice(self, choice: dict[str, Any]) -> dict[str, Any]:
        choice["content_filter_results"] = _FILTER_RESULTS
        return choice

    def _decorate_completion(self, body: dict[str, Any]) -> dict[str, Any]:
        body["prompt_filter_results"] = _PROMPT_FILTER_RESULTS
        return body

    def _stream_preamble(self, ctx: RenderContext) -> bytes:
        return sse_data({
            "choices": [],
            "created": 0,
            "id": "",
            "model": "",
            "object": "",
            "prompt_filter_results": _PROMPT_FILTER_RESULTS,
        })

    def response_headers(self, ctx: RenderContext) -> Headers:
        return [(b"apim-request-id", ctx.token.encode()), (b"x-ms-region", b"Simulated Region")]

    def error(self, problem: Problem) -> ErrorReply:
        if problem.case in (INVALID_JSON, INVALID_REQUEST, CONTEXT_OVERFLOW):
            return super().error(problem)
        code, message = self._azure_wording(problem)
        return ErrorReply(problem.status, dumps({"error": {"code": code, "message": problem.message or message}}))

    def _azure_wording(self, problem: Problem) -> tuple[str, str]:
        case, status = problem.case, problem.status
        if case in (MISSING_KEY, INVALID_KEY):
            return "401", _ACCESS_DENIED
        if case == PERMISSION:
            return "PermissionDenied", "The principal does not have permission to perform this operation."
        if case == MODEL_NOT_FOUND:
            return (
                "DeploymentNotFound",
                "The API deployment for this resource does not exist. If you created the deployment within "
                "the last 5 minutes, please wait a moment and try again.",
            )
        if case == RATE_LIMIT:
            wait = problem.retry_after_s if problem.retry_after_s is not None else 1.0
            return (
                "429",
                f"Requests to the ChatCompletions_Create Operation under Azure OpenAI API version "
                f"{API_VERSION_EXAMPLE} have exceeded token rate limit of your current OpenAI S0 pricing tier. "
                f"Please retry after {max(1, round(wait))} seconds. Please go here: "
                "https://aka.ms/oai/quotaincrease if you would like to further increase the default rate limit.",
            )
        if case == QUOTA:
            return "insufficient_quota", "The subscription has exceeded its quota for this resource."
        if case == UNKNOWN_PATH:
            return "404", "Resource not found"
        if status == 502:
            return "BadGateway", _UNAVAILABLE
        if status == 504:
            return "Timeout", "The operation was timeout."
        if status in (503, 529):
            return "ServiceUnavailable", _UNAVAILABLE
        return "InternalServerError", _UNAVAILABLE
