"""GatewayError: what the gateway answers a client with when it cannot (or must not) serve a request.

Raised anywhere on the request path and rendered by the views in the client's own envelope (OpenAI's or
Anthropic's). ``status`` is always 4xx for the caller's mistakes and 502/503/504 for upstream failures.
"""

from __future__ import annotations


class GatewayError(Exception):
    def __init__(
        self,
        status: int,
        message: str,
        *,
        code: str | None = None,
        param: str | None = None,
        type: str | None = None,  # (shadows the builtin: it is the envelope's own word)
        headers: dict[str, str] | None = None,
        error_class: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.param = param
        self.type = type
        self.headers = dict(headers or {})
        self.error_class = error_class
