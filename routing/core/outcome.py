"""Error classes and the outcome of one upstream attempt, shared by the policy and the health model.

Every failed attempt is exactly one class; the class decides what the gateway does next::

    ErrorClass
    ├── PERMANENT         the client's own mistake (bad request, bad gateway key, a prompt refused by the
    │                     provider's content filter): answer it, never retry, never cool a target down
    ├── TRANSIENT         429, 5xx, connect failure, timeout before any byte: retry or fall back
    ├── INCOMPATIBLE      this target cannot serve this request (context overflow, unsupported parameter,
    │                     modality or tool; the provider rejects our key, does not know the model, or the
    │                     account is out of quota): fall back, never retry the same target
    ├── INVALID_RESPONSE  an answer arrived but failed validation (unparseable, truncated, schema or
    │                     tool-call violation): fall back
    └── AMBIGUOUS         the request may have been executed (connection lost after sending, read timeout
                          mid-generation): never replay blindly; recorded as "unknown"

``routing.core.error_classifier`` turns status codes, provider error bodies and transport exceptions into outcomes;
``routing.core.validate`` turns rejected answers into INVALID_RESPONSE outcomes; ``routing.core.retry``
decides the next step. The full table is in docs/reliability.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Literal


class ErrorClass(StrEnum):
    PERMANENT = "permanent"
    TRANSIENT = "transient"
    INCOMPATIBLE = "incompatible"
    INVALID_RESPONSE = "invalid_response"
    AMBIGUOUS = "ambiguous"


# INCOMPATIBLE reasons that say the *target* is broken for every request (our key, our model name, our
# account), not that this one request does not fit it. The health model cools such a target for the
# maximum; the other INCOMPATIBLE reasons (context_overflow, unsupported) never cool a target.
TARGET_FAULT_REASONS = frozenset({"auth", "not_found", "quota", "key_unavailable"})

# The reason of a failure that cannot have reached the provider's model: the connection was never made.
# Only these are retried on the same route by default (nothing billable can have happened).
EARLY_FAILURE_REASONS = frozenset({"connect_error"})

AttemptResult = Literal["ok", "failed", "unknown"]


@dataclass(frozen=True, slots=True)
class AttemptOutcome:
    """What one upstream attempt came to, as the health model and the policy see it.

    ``reason`` is a short, bounded machine word used in metrics and audit:

    - PERMANENT: ``bad_request``, ``content_filter``
    - TRANSIENT: ``rate_limited``, ``overloaded``, ``server_error``, ``connect_error``, ``timeout``
    - INCOMPATIBLE: ``context_overflow``, ``unsupported``, ``auth``, ``not_found``, ``quota``,
      ``key_unavailable`` (no configured key of the provider resolved: nothing was sent)
    - INVALID_RESPONSE: ``malformed``, ``truncated``, ``schema``, ``tool_call``, ``too_short``, ``custom``
    - AMBIGUOUS: ``timeout``, ``connection_lost``, ``stream_cut``
    - success: ``ok``
    """

    ok: bool
    error_class: ErrorClass | None = None
    reason: str = "ok"
    status: int | None = None
    latency_s: float = 0.0
    retry_after_s: float | None = None

    @staticmethod
    def success(latency_s: float, status: int = 200) -> AttemptOutcome:
        return AttemptOutcome(ok=True, status=status, latency_s=latency_s)

    @staticmethod
    def failure(
        error_class: ErrorClass,
        reason: str,
        *,
        status: int | None = None,
        latency_s: float = 0.0,
        retry_after_s: float | None = None,
    ) -> AttemptOutcome:
        return AttemptOutcome(
            ok=False,
            error_class=error_class,
            reason=reason,
            status=status,
            latency_s=latency_s,
            retry_after_s=retry_after_s,
        )

    @property
    def result(self) -> AttemptResult:
        """``ok``, ``failed`` or ``unknown``: how the audit records the attempt.

        An ambiguous attempt may have been executed and billed, so it is ``unknown``, never ``failed``.
        """
        if self.ok:
            return "ok"
        return "unknown" if self.error_class is ErrorClass.AMBIGUOUS else "failed"

    @property
    def punishes_target(self) -> bool:
        """True when the failure says something about the target's health (not about this request).

        PERMANENT (the client's fault) and request-specific INCOMPATIBLE reasons never cool a target down.
        """
        if self.ok or self.error_class is None or self.error_class is ErrorClass.PERMANENT:
            return False
        if self.error_class is ErrorClass.INCOMPATIBLE:
            return self.reason in TARGET_FAULT_REASONS
        return True
