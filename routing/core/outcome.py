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

from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Literal


class ErrorClass(StrEnum):
    PERMANENT = "permanent"
    TRANSIENT = "transient"
    INCOMPATIBLE = "incompatible"
    INVALID_RESPONSE = "invalid_response"
    AMBIGUOUS = "ambiguous"


# INCOMPATIBLE reasons that say the *target* is broken for every request (our key, our model name, our
# account, our TLS trust), not that this one request does not fit it. The health model cools such a target for
# the maximum; the other INCOMPATIBLE reasons (context_overflow, unsupported) never cool a target.
TARGET_FAULT_REASONS = frozenset({"auth", "not_found", "quota", "key_unavailable", "tls_error"})

# The reason of a failure that cannot have reached the provider's model: the connection was never made.
# Only these are retried on the same route by default (nothing billable can have happened).
EARLY_FAILURE_REASONS = frozenset({"connect_error"})

# The reasons of an attempt that its own timeout ended: no connection in time, no byte in time, a stream cut off.
TIMEOUT_REASONS = frozenset({"timeout", "connect_error", "stream_cut"})
CUT_SLACK_S = 0.005  # a timer fires at its time or after; this absorbs the clock reads around it

AttemptResult = Literal["ok", "failed", "unknown"]
# Whose failure an attempt was, as the audit records it: ``client`` (the request itself caused it: its own mistake,
# a request this target cannot serve, its deadline, its max_tokens, what it asked the answer to be), ``target`` (it
# counts against the target's health), ``gateway`` (the gateway's own overload: nothing was sent).
Cause = Literal["client", "target", "gateway"]


@dataclass(frozen=True, slots=True)
class AttemptOutcome:
    """What one upstream attempt came to, as the health model and the policy see it.

    ``reason`` is a short, bounded machine word used in metrics and audit:

    - PERMANENT: ``bad_request``, ``content_filter``
    - TRANSIENT: ``rate_limited``, ``overloaded``, ``server_error``, ``connect_error``, ``timeout``
    - INCOMPATIBLE: ``context_overflow``, ``unsupported``, ``auth``, ``not_found``, ``quota``,
      ``key_unavailable`` (no configured key of the provider resolved: nothing was sent), ``tls_error`` (the
      provider's certificate fails verification or its TLS cannot work: nothing was sent)
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
    # True: the request itself caused this failure although its class alone would blame the target (a timeout at
    # the client's own deadline, an answer refused for what the request asked of it). It never touches the
    # target's health: not its breaker, its runs, nor its latency estimate.
    client_caused: bool = False

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

    def by_client(self) -> AttemptOutcome:
        """This failure, marked as caused by the request itself (``client_caused``); a success stays as it is."""
        return self if self.ok or self.client_caused else replace(self, client_caused=True)

    @property
    def cause(self) -> Cause | None:
        """Whose failure this was (None for a success): ``target`` exactly when it counts against its health."""
        if self.ok:
            return None
        if self.reason == "gateway_overloaded":
            return "gateway"
        return "target" if self.punishes_target else "client"

    @property
    def punishes_target(self) -> bool:
        """True when the failure says something about the target's health (not about this request).

        PERMANENT (the client's fault), request-specific INCOMPATIBLE reasons and failures the request itself
        caused (``client_caused``) never cool a target down.
        """
        if self.ok or self.error_class is None or self.error_class is ErrorClass.PERMANENT or self.client_caused:
            return False
        if self.error_class is ErrorClass.INCOMPATIBLE:
            return self.reason in TARGET_FAULT_REASONS
        return True


def ended_by_client_deadline(outcome: AttemptOutcome, *, now: float, cut_at: float | None) -> bool:
    """Whether ``outcome`` is its attempt being cut off at ``cut_at``, where the client's deadline ended it.

    ``cut_at`` is None when the gateway's own bound (the provider's timeout, the gateway's default deadline) was
    what limited the attempt: a timeout there is the target's. A failure before ``cut_at`` is the target's too.
    """
    return (cut_at is not None and not outcome.ok and outcome.reason in TIMEOUT_REASONS
            and now >= cut_at - CUT_SLACK_S)
