"""The attempt loop: walk a request's plan under its deadline until an answer is accepted or the policy stops.

Each pass takes the next candidate and
1. ``_launchable``: skips it when the deadline leaves no room for it or its breaker refuses it;
2. ``_attempt``: sends one attempt (JSON to its end, a stream until its first client frames);
3. ``_record``: books the outcome into the attempt record, the target's health and the metrics;
4. ``_next_step``: asks the retry policy whether to retry the same target, fall back, or stop.
A failure the request itself caused never reaches the target's health: a timeout where the client's own deadline
cut the attempt off (``ended_by_client_deadline``), an answer refused for what the request asked of it
(``routing.core.validate``). A 401/403/404 is first a suspicion of the gateway key that saw it
(``routing.core.lockouts``): that key avoids the target, and a probe with the gateway's own credentials is sent
at once (``routing.gateway.background.prober.confirm_soon``); it locks the target out for every key once confirmed.
``_give_up`` turns the loop's last state into the client's error. A stream that produced frames, and a JSON
answer that passed validation, are answered at once (``routing.gateway.client_answer``).
"""

from __future__ import annotations

import asyncio
import math
import time
from typing import NoReturn

from django.conf import settings
from django.http import HttpResponse, StreamingHttpResponse

from routing.clients import gcp_tokens
from routing.clients.aws_credentials import CredentialsUnavailable
from routing.clients.gcp_tokens import GOOGLE_TOKEN_KINDS
from routing.clients.http1 import PoolExhausted
from routing.config.answer_checks import resolve_validator
from routing.core.contracts import EffectiveContract
from routing.core.deadline import AttemptAllowance, Deadline
from routing.core.health import CooldownStarted, TargetHealth
from routing.core.lockouts import needs_confirmation
from routing.core.outcome import AttemptOutcome, ErrorClass, ended_by_client_deadline
from routing.core.provider_limits import QuotaTicket, choices_of, reservation
from routing.core.retry import client_status
from routing.core.table import ModelSpec
from routing.core.validate import ValidationRules
from routing.gateway.attempt import (
    AttemptResult,
    AttemptSpec,
    LiveStream,
    model_cost,
    run_json_attempt,
    start_stream_attempt,
    used_tokens,
)
from routing.gateway.background.prober import confirm_soon
from routing.gateway.client_answer import count_attempt, health_view, json_response, stream_response
from routing.gateway.gateway_error import GatewayError
from routing.gateway.records import AttemptRecord, Call, Journey
from routing.gateway.state import state
from routing.ops import metrics
from routing.providers import TranslationError, client_wants_usage, get_adapter
from routing.providers.thinking_notes import thinking_off_for

Response = HttpResponse | StreamingHttpResponse

# How each failure reason reads in the client's error message.
_FAILURE_WORDS = {
    "rate_limited": "every eligible upstream is rate limiting",
    "overloaded": "every eligible upstream is overloaded",
    "timeout": "the upstream did not answer in time",
    "context_overflow": "the request does not fit the context window of any eligible model",
    "unsupported": "no eligible model supports a parameter of this request",
    "auth": "the gateway's provider credentials were refused",
    "not_found": "the provider does not know the configured model",
    "key_unavailable": "the gateway has no usable provider key configured (its log names the key reference)",
    "tls_error": "TLS to the provider failed",
}


def validation_rules(contract: EffectiveContract) -> ValidationRules:
    checks = [resolve_validator(contract.validator)] if contract.validator else []
    return ValidationRules.from_contract(contract, extra_checks=checks)


class AttemptLoop:
    """One request's walk over its candidates; ``run`` returns the response or raises ``GatewayError``."""

    def __init__(self, call: Call, journey: Journey, models: list[ModelSpec], contract: EffectiveContract,
                 deadline: Deadline) -> None:
        self.call = call
        self.journey = journey
        self.models = models
        self.deadline = deadline
        # The deadline in force is the client's (its header, its workload's contract), not the gateway's default:
        # an attempt it cuts off is the client's failure, never the target's.
        self.client_deadline = "x-gomodel-deadline-ms" in call.headers or contract.deadline_ms is not None
        self.rules = validation_rules(contract)
        self.wants_usage = client_wants_usage(call.inbound, call.body)
        self.index = 0  # the candidate being tried
        self.same_retries = 0  # retries of the current candidate
        self.fallbacks = 0
        self.last: AttemptResult | None = None  # the last failed JSON attempt
        self.translation_error: TranslationError | None = None
        self.deadline_exhausted = False
        self.cooling_until: float | None = None  # the earliest end of a cooldown that refused a candidate
        self.limited_for: float | None = None  # the shortest wait of a candidate skipped at its provider's limit
        self.ticket: QuotaTicket | None = None  # the current attempt's count in its provider's rpm/tpm
        self._reserve: int | None = None  # the tokens an attempt reserves (computed for a limited model only)

    async def run(self) -> Response:
        state.retry_budget.record_request(time.monotonic())
        while self.index < len(self.models):
            model = self.models[self.index]
            health = state.health.get(model.name)
            allowance = AttemptAllowance.for_target(health.latency_estimate_s)
            admission = self._launchable(model, health, allowance)
            if admission is None or not await self._admit_to_quota(model, health, probe=admission == "probe"):
                self.index += 1
                continue
            record = AttemptRecord(seq=len(self.journey.attempts) + 1, target=model.name, provider=model.provider)
            if thinking_off_for(kind=self.call.table.providers[model.provider].kind, upstream=model.upstream,
                                body=self.call.body, inbound=self.call.inbound):
                record.thinking = "off"  # the final tool turn came back without Claude's signed thinking
            self.journey.attempts.append(record)
            result = await self._attempt(model, record, health, allowance, probe=admission == "probe")
            if result is None:  # the request could not be translated for this target
                self.index += 1
                continue
            if isinstance(result, LiveStream):
                result.quota, self.ticket = self.ticket, None  # settled when the stream ends
                record.ttfb_s = result.ttfb_s
                now = time.monotonic()
                health.record(AttemptOutcome.success(result.ttfb_s), now)
                # Committed: no other attempt can follow, so the rest of the stream may take what is left of
                # the request's deadline (within the provider's timeout), not only this attempt's share.
                timeout_s = self.call.table.providers[model.provider].timeout_s
                remaining, provider_left = self.deadline.remaining(now), timeout_s - (now - result.started)
                result.response.extend_deadline(min(remaining, provider_left))
                if self.client_deadline and remaining < provider_left:
                    result.client_deadline_at = self.deadline.at
                return await stream_response(self.call, self.journey, record, model, result, self.rules, health,
                                             admission == "probe")
            self._record(model, record, health, result)
            if result.outcome.ok:
                return json_response(self.call, self.journey, record, model, result)
            if not await self._next_step(record, result.outcome, allowance):
                break
        self._give_up()

    def _launchable(self, model: ModelSpec, health: TargetHealth, allowance: AttemptAllowance) -> str | None:
        """The breaker's admission ("admitted" or "probe"), or None when this candidate is skipped.

        Its provider's rpm/tpm is checked next, by ``_admit_to_quota``.
        """
        now = time.monotonic()
        # The primary attempt always goes out while time remains (the client chose the deadline); a
        # retry or fallback only when it can still finish. A faster candidate further down may fit.
        if self.journey.attempts:
            launchable = self.deadline.can_launch(now, allowance)
        else:
            launchable = not self.deadline.expired(now)
        if not launchable:
            self.deadline_exhausted = True
            return None
        avoided = state.lockouts.avoids(model.name, self.call.key_scope, now)
        if avoided is not None:  # this key met a 401/403/404 there that is not confirmed yet: only it keeps off
            self.cooling_until = avoided if self.cooling_until is None else min(self.cooling_until, avoided)
            return None
        admission = health.begin(now)
        if admission == "refused":  # cooling down (a concrete model has no alternative to skip to)
            until = health.cooldown_until
            if until is not None:
                self.cooling_until = until if self.cooling_until is None else min(self.cooling_until, until)
            return None
        return admission

    async def _admit_to_quota(self, model: ModelSpec, health: TargetHealth, *, probe: bool) -> bool:
        """Count the attempt against its model's provider rpm/tpm now that it is about to be sent (``self.ticket``);
        False when the minute has no room for it, and the candidate is skipped like a cooling one.

        A model without provider limits costs one dict lookup. With Redis the check is one round trip, exact
        across every process (routing.clients.provider_quota_store); the attempt reserves its expected tokens.
        """
        self.ticket = None
        quota = state.quotas.get(model.name)
        if quota is None:
            return True
        try:
            verdict = await state.provider_quotas.admit(quota, self._reservation(), time.monotonic())
        except BaseException:
            health.end(time.monotonic(), probe=probe)
            raise
        if isinstance(verdict, QuotaTicket):
            self.ticket = verdict
            return True
        health.end(time.monotonic(), probe=probe)
        metrics.TARGET_LIMIT_SKIPS.labels(model.name, verdict.reason).inc()
        wait = verdict.retry_after_s
        self.limited_for = wait if self.limited_for is None else min(self.limited_for, wait)
        return False

    def _reservation(self) -> int:
        """The tokens an attempt of this request reserves against a provider's tpm (routing.core.provider_limits)."""
        if self._reserve is None:
            call = self.call
            max_output = 0 if call.embeddings is not None else call.features.max_output_tokens
            self._reserve = reservation(input_tokens=self._input_tokens(), max_output_tokens=max_output,
                                        choices=choices_of(call.body.get("n")),
                                        default_output_tokens=settings.GOMODEL_LIMIT_DEFAULT_OUTPUT_TOKENS)
        return self._reserve

    def _input_tokens(self) -> int:
        embeddings = self.call.embeddings
        return embeddings.estimated_tokens() if embeddings is not None else self.call.features.estimated_input_tokens

    def _release_quota(self) -> None:
        """Nothing reached the provider: the attempt's request and reservation are taken back."""
        if self.ticket is not None:
            state.provider_quotas.release(self.ticket)
            self.ticket = None

    def _settle_quota(self, result: AttemptResult) -> None:
        """A finished JSON attempt's tokens replace its reservation: the answer's usage (or an estimate); nothing
        for an error the provider answered with; the whole reservation when no answer came (a timeout, a cut
        connection), since the provider may still have done the work."""
        ticket, self.ticket = self.ticket, None
        if ticket is None:
            return
        if result.answer is not None or (result.usage is not None and result.usage.total_tokens > 0):
            tokens = used_tokens(result.usage, result.answer, input_tokens=self._input_tokens())
        elif result.outcome.status is not None:
            tokens = 0
        else:
            tokens = ticket.reserved
        state.provider_quotas.settle(ticket, tokens)

    async def _attempt(self, model: ModelSpec, record: AttemptRecord, health: TargetHealth,
                       allowance: AttemptAllowance, *, probe: bool) -> AttemptResult | LiveStream | None:
        """One attempt; None when the request cannot be sent to this target (recorded as a fallback)."""
        provider = self.call.table.providers[model.provider]
        keys, key_problems = provider.api_keys, provider.key_problems
        if provider.kind in GOOGLE_TOKEN_KINDS:  # Vertex AI: the key is the provider's current access token
            keys, key_problems = await gcp_tokens.access_keys(provider)
        if not keys and key_problems:
            # Keys are configured but none resolved (a reference refused, a variable unset): going out without
            # one would only earn a 401, so the attempt fails here as the configuration error it is.
            health.end(time.monotonic(), probe=probe)
            self._release_quota()
            record.error_message = f"provider {provider.name} has no usable key: {'; '.join(key_problems)}"
            return AttemptResult(AttemptOutcome.failure(ErrorClass.INCOMPATIBLE, "key_unavailable"))
        api_key = keys[state.next_key_index(provider.name, len(keys))].reveal() if keys else ""
        spec = AttemptSpec(provider=provider, model=model, body=self.call.body, inbound=self.call.inbound,
                           stream=self.call.features.stream and self.call.embeddings is None, api_key=api_key,
                           timeout_s=self._attempt_timeout(allowance), rules=self.rules,
                           client_wants_usage=self.wants_usage, embeddings=self.call.embeddings,
                           responses=self.call.responses, client_headers=self.call.headers,
                           needs=self.call.needs if self.call.embeddings is None else None)
        # When the client's deadline, rather than the provider's timeout, is what ends this attempt.
        cut_at = (time.monotonic() + spec.timeout_s
                  if self.client_deadline and spec.timeout_s < provider.timeout_s else None)
        try:
            result = await (start_stream_attempt(spec) if spec.stream else run_json_attempt(spec))
        except TranslationError as exc:
            health.end(time.monotonic(), probe=probe)
            self._release_quota()
            if self.call.responses is not None:  # the refusal names the client's Responses field, not the chat one
                exc.param = self.call.responses.client_param(exc.param)
            self.translation_error = exc
            record.outcome = AttemptOutcome.failure(ErrorClass.INCOMPATIBLE, "unsupported", latency_s=0.0)
            record.action = "fallback" if self.index + 1 < len(self.models) else "gave_up"
            record.error_message = exc.message
            return None
        except CredentialsUnavailable as exc:  # Bedrock signing: no AWS credentials configured or found
            health.end(time.monotonic(), probe=probe)
            self._release_quota()
            record.error_message = f"provider {provider.name} has no usable key: {exc}"
            return AttemptResult(AttemptOutcome.failure(ErrorClass.INCOMPATIBLE, "key_unavailable"))
        except PoolExhausted as exc:
            health.end(time.monotonic(), probe=probe)
            self._release_quota()
            self._gateway_overloaded(model, record, exc)
        except BaseException:
            health.end(time.monotonic(), probe=probe)
            raise
        if not isinstance(result, LiveStream):
            now = time.monotonic()
            health.end(now, probe=probe)
            if ended_by_client_deadline(result.outcome, now=now, cut_at=cut_at):
                result.outcome = result.outcome.by_client()
        return result

    def _gateway_overloaded(self, model: ModelSpec, record: AttemptRecord, exc: PoolExhausted) -> NoReturn:
        """No upstream connection slot freed up in time: the gateway's own overload, answered at once.

        Nothing was sent, so the provider's health is untouched (no cooldown) and no other attempt follows:
        a retry or a fallback would only queue for the same slots.
        """
        metrics.UPSTREAM_POOL_EXHAUSTED.labels(model.provider).inc()
        record.outcome = AttemptOutcome.failure(ErrorClass.TRANSIENT, "gateway_overloaded")
        record.action = "gave_up"
        record.error_message = str(exc)
        self.journey.error_class = str(ErrorClass.TRANSIENT)
        raise GatewayError(503, "The gateway has no free connection to the provider right now; retry shortly.",
                           code="gateway_overloaded", headers={"Retry-After": "1"}, error_class="transient")

    def _record(self, model: ModelSpec, record: AttemptRecord, health: TargetHealth, result: AttemptResult) -> None:
        """Book a finished JSON attempt: health (and a cooldown it trips), the record, the metrics."""
        self.last = result
        cooldown = self._record_health(model, health, result)
        outcome = result.outcome
        if cooldown is not None:
            metrics.ROUTING_COOLDOWNS.labels(model.name, cooldown.reason).inc()
        record.outcome = outcome
        record.ttfb_s = result.ttfb_s
        record.usage = result.usage
        record.cost = model_cost(model, result.usage) if result.usage else None
        self._settle_quota(result)
        if outcome.ok:
            record.validation = "accepted"
        elif result.verdict is not None and not result.verdict.ok:
            record.validation = f"rejected:{result.verdict.reason}"
            metrics.VALIDATION_REJECTIONS.labels(result.verdict.reason).inc()
        else:
            record.validation = "not_run"
        record.health = health_view(health, time.monotonic())
        count_attempt(model.name, outcome)

    def _record_health(self, model: ModelSpec, health: TargetHealth, result: AttemptResult) -> CooldownStarted | None:
        """Book an attempt's outcome into the target's health; a lockout only once confirmed (module docstring)."""
        now, outcome = time.monotonic(), result.outcome
        if not needs_confirmation(outcome):
            return health.record(outcome, now)
        report = state.lockouts.report(model.name, self.call.key_scope, now)
        if report == "confirmed":  # a second key saw the same: the target is locked out for every key
            return health.record(outcome, now)
        if report == "suspected":  # only this key keeps off the target while a probe finds out
            confirm_soon(state, self.call.table, model.name)
        else:  # a probe with the gateway's credentials just passed there: the request earned its own answer
            result.outcome = outcome.by_client()
        return None

    async def _next_step(self, record: AttemptRecord, outcome: AttemptOutcome, allowance: AttemptAllowance) -> bool:
        """Apply the retry policy to a failed attempt; False when the loop stops here."""
        action = state.retry_policy.next_action(
            outcome, attempt_no=len(self.journey.attempts), same_route_retries=self.same_retries,
            fallbacks=self.fallbacks, stream_started=False, remaining_s=self.deadline.remaining(time.monotonic()),
            fallback_available=self.index + 1 < len(self.models), rng=state.rng,
            launch_allowance_s=allowance.total, budget=state.retry_budget, now=time.monotonic(),
        )
        record.action = {"give_up": "gave_up", "return_to_client": "returned_to_client"}.get(action.kind, action.kind)
        if action.kind == "retry_same":
            metrics.RETRIES.labels(outcome.reason).inc()
            self.same_retries += 1
            await asyncio.sleep(action.delay_s)
            return True
        if action.kind == "fallback":
            metrics.FALLBACKS.labels(outcome.reason).inc()
            self.index += 1
            self.same_retries = 0
            self.fallbacks += 1
            return True
        if action.reason == "retry_budget":
            metrics.RETRY_BUDGET_EXHAUSTED.inc()
        if action.reason == "deadline":
            self.deadline_exhausted = True
        return False

    def _attempt_timeout(self, allowance: AttemptAllowance) -> float:
        """The remaining time, less what one fallback would need when a fallback exists.

        A hanging primary must not eat the whole deadline: when the next candidate's allowance can be set
        aside while this attempt still keeps its own, it is set aside.
        """
        remaining = self.deadline.attempt_timeout(time.monotonic())
        if self.index + 1 >= len(self.models) or state.retry_policy.max_fallbacks == 0:
            return remaining
        following = state.health.get(self.models[self.index + 1].name)
        # What the fallback needs, with room for the gateway's own work between the two attempts.
        reserve = AttemptAllowance.for_target(following.latency_estimate_s).total * 1.25 + 0.1
        if remaining - reserve >= allowance.total:
            return remaining - reserve
        return remaining

    def _give_up(self) -> NoReturn:
        """The client's error once no attempt was accepted: why, in the client's terms."""
        last = self.last
        if last is None:
            self._nothing_sent()
        outcome = last.outcome
        journey = self.journey
        journey.error_class = str(outcome.error_class) if outcome.error_class else None
        if self.deadline_exhausted:
            metrics.DEADLINE_EXHAUSTED.inc()
        status = client_status(outcome, deadline_exhausted=self.deadline_exhausted)
        headers: dict[str, str] = {}
        if status in (503, 429) or outcome.retry_after_s:
            headers["Retry-After"] = str(max(1, math.ceil(outcome.retry_after_s or 1)))
        if outcome.error_class is ErrorClass.PERMANENT and last.error_body is not None:
            raise GatewayError(status, self._provider_message(outcome, last.error_body), code=outcome.reason,
                               error_class="permanent", headers=headers)
        detail = _FAILURE_WORDS.get(outcome.reason, f"the last upstream attempt failed ({outcome.reason})")
        if last.failure_detail:  # what a TLS failure's verification said (the log names the provider's host)
            detail = f"{detail} ({last.failure_detail})"
        if self.deadline_exhausted:
            detail = f"the deadline ran out ({detail})"
        tried = len(journey.attempts)
        raise GatewayError(status, f"{detail[0].upper()}{detail[1:]}; {tried} attempt{'s' if tried != 1 else ''} made.",
                           code=outcome.reason, headers=headers, error_class=journey.error_class)

    def _nothing_sent(self) -> NoReturn:
        """No attempt produced an upstream answer: untranslatable, every candidate cooling, or no time."""
        if self.translation_error is not None:
            exc = self.translation_error
            raise GatewayError(exc.status, exc.message, param=exc.param, code=exc.code, error_class="incompatible")
        if self.cooling_until is not None and not self.deadline_exhausted:
            wait = max(1, math.ceil(self.cooling_until - time.monotonic()))
            raise GatewayError(503, f"`{self.journey.target_name}` is cooling down after upstream errors; retry in "
                                    f"{wait}s.", code="all_targets_cooling", headers={"Retry-After": str(wait)},
                               error_class="transient")
        if self.limited_for is not None and not self.deadline_exhausted:
            wait = max(1, math.ceil(self.limited_for))
            raise GatewayError(503, f"`{self.journey.target_name}` has used its provider's requests or tokens per "
                                    f"minute; retry in {wait}s.", code="provider_limit_reached",
                               headers={"Retry-After": str(wait)}, error_class="transient")
        metrics.DEADLINE_EXHAUSTED.inc()
        raise GatewayError(504, "The deadline ran out before any upstream attempt could be made.",
                           code="deadline_exceeded", error_class="transient")

    def _provider_message(self, outcome: AttemptOutcome, error_body: bytes) -> str:
        """The client's own mistake, as the provider explained it."""
        table = self.call.table
        model = table.models.get(self.journey.attempts[-1].target)
        provider = table.providers.get(model.provider) if model else None
        if provider is None:
            return "The upstream provider refused the request."
        error = get_adapter(provider.kind).parse_error(status=outcome.status or 400, data=error_body)
        return error.message or "The upstream provider refused the request."
