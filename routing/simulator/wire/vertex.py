"""Google Vertex AI: Gemini (``publishers/google``) and Anthropic's Claude (``publishers/anthropic``).

``POST /v1/projects/{project}/locations/{region}/publishers/google/models/{model}:generateContent`` (and
``:streamGenerateContent``, SSE with ``alt=sse``) take and answer the Gemini API's bodies;
``.../publishers/anthropic/models/{model}:rawPredict`` (and ``:streamRawPredict``) take Anthropic's Messages body
without ``model`` and with ``"anthropic_version": "vertex-2023-10-16"``, and answer as Anthropic does. Both
authenticate with ``Authorization: Bearer <access token>`` only (no API key header): a request without one is
a 401 ``UNAUTHENTICATED``. Authentication, quota and unknown-model errors come in Google's envelope
(``{"error": {"code", "message", "status"}}``) for both publishers; Claude's own request checks answer in
Anthropic's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from routing.simulator.prompt import Prompt
from routing.simulator.wire.anthropic import AnthropicWire
from routing.simulator.wire.base import (
    INVALID_KEY,
    MISSING_KEY,
    MODEL_NOT_FOUND,
    PERMISSION,
    QUOTA,
    RATE_LIMIT,
    ErrorReply,
    Problem,
    RequestError,
    dumps,
    sse_event,
)
from routing.simulator.wire.gemini import GeminiWire

ANTHROPIC_VERSION = "vertex-2023-10-16"
_GOOGLE_CASES = frozenset({MISSING_KEY, INVALID_KEY, PERMISSION, MODEL_NOT_FOUND, RATE_LIMIT, QUOTA})


def bearer_credentials(headers: Mapping[str, str]) -> tuple[str | None, str | None]:
    authorization = headers.get("authorization", "")
    if authorization[:7].lower() == "bearer " and authorization[7:].strip():
        return "authorization", authorization[7:].strip()
    return None, None


def google_wording(problem: Problem, publisher: str) -> tuple[int, str, str] | None:
    """(status, message, Google status name) for the errors Vertex AI itself answers, whatever the publisher."""
    case, model = problem.case, problem.model
    if case == MISSING_KEY:
        return 401, ("Request is missing required authentication credential. Expected OAuth 2 access token, login "
                     "cookie or other valid authentication credential."), "UNAUTHENTICATED"
    if case == INVALID_KEY:
        return 401, ("Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie "
                     "or other valid authentication credential."), "UNAUTHENTICATED"
    if case == PERMISSION:
        return 403, (f"Permission 'aiplatform.endpoints.predict' denied on resource "
                     f"'publishers/{publisher}/models/{model}' (or it may not exist)."), "PERMISSION_DENIED"
    if case == MODEL_NOT_FOUND:
        return 404, (f"Publisher Model `publishers/{publisher}/models/{model}` was not found or your project does "
                     "not have access to it."), "NOT_FOUND"
    if case in (RATE_LIMIT, QUOTA):
        return 429, (f"Quota exceeded for aiplatform.googleapis.com/generate_content_requests_per_minute_per_project"
                     f"_per_base_model with base model: {model}. Please submit a quota increase request."), \
            "RESOURCE_EXHAUSTED"
    return None


def google_error(status: int, message: str, status_name: str) -> bytes:
    return dumps({"error": {"code": status, "message": message, "status": status_name}})


class VertexGeminiWire(GeminiWire):
    name = "vertex"

    def credentials(self, headers: Mapping[str, str], query: Mapping[str, str]) -> tuple[str | None, str | None]:
        return bearer_credentials(headers)

    def _wording(self, problem: Problem) -> tuple[int, str, str, list[dict[str, Any]]]:
        google = google_wording(problem, "google")
        if google is not None:
            return (*google, [])
        return super()._wording(problem)  # request checks, overflow, 5xx: the Gemini API's wording


class VertexAnthropicWire(AnthropicWire):
    name = "vertex_anthropic"

    def credentials(self, headers: Mapping[str, str], query: Mapping[str, str]) -> tuple[str | None, str | None]:
        return bearer_credentials(headers)

    def precheck(self, headers: Mapping[str, str], query: Mapping[str, str], model: str) -> Problem | None:
        return None  # the version is a body field here, checked by parse

    def parse(self, body: Mapping[str, Any], model: str) -> Prompt:
        version = body.get("anthropic_version")
        if version is None:
            raise RequestError("anthropic_version: Field required", "anthropic_version")
        if version != ANTHROPIC_VERSION:
            raise RequestError(f"anthropic_version: Input should be '{ANTHROPIC_VERSION}'", "anthropic_version")
        return super().parse({**body, "model": model}, model)  # the path names the model

    def error(self, problem: Problem) -> ErrorReply:
        google = google_wording(problem, "anthropic")
        if google is None:
            return super().error(problem)
        status, message, status_name = google
        return ErrorReply(status, google_error(status, problem.message or message, status_name))

    def stream_error(self, problem: Problem) -> bytes:
        google = google_wording(problem, "anthropic")
        if google is None:
            return super().stream_error(problem)
        status, message, status_name = google
        return sse_event("error", {"type": "error", "error": {"type": status_name.lower(),
                                                              "message": problem.message or message}})
