"""Build the audit event of one request and hand it to the publisher (which never blocks the loop)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from django.apps import apps

from routing.gateway.records import Call, Journey, usage_dict

log = logging.getLogger("gomodel.audit")

# Asked of Django's app registry, not inferred from an ImportError: a broken import inside the audit app must
# stop the gateway at start-up, never silently switch the audit trail off.
publish: Callable[[dict[str, Any]], None] | None = None
if apps.is_installed("audit"):
    from audit.delivery.publisher import publish


def build_event(call: Call, journey: Journey, elapsed_s: float) -> dict[str, Any]:
    session = call.detected_session
    plan = journey.plan
    selection = None
    if plan is not None and plan.records:
        # The first record is the virtual model the request was resolved through; nested ones follow.
        selection = plan.records[0].as_event()
        if len(plan.records) > 1:
            selection["nested"] = [record.as_event() for record in plan.records[1:]]
        if plan.rejected:
            selection["rejected"] = [{"target": t, "reason": r} for t, r in plan.rejected[:20]]
    answer = journey.answer
    return {
        "request_id": call.request_id,
        "operation_id": journey.operation_id or call.request_id,
        "created_at": call.started_unix,
        "key_id": call.key.id if call.key else None,
        "key_name": call.key.name if call.key else "",
        "team": call.key.team_name if call.key else "",
        # The limit that refused the request with a 429, "<key|team>:<rpm|tpm|concurrency|budget>"; "" otherwise.
        "limit": journey.limit_refused,
        "session_hash": session.value.split(":", 1)[1] if session is not None else None,
        "session_source": session.source if session is not None else None,
        "endpoint": call.audit_endpoint,
        "requested_model": journey.requested_model,
        "stream": call.features.stream,
        "tier": journey.tier.as_event() if journey.tier is not None else None,
        **_category_fields(journey),
        # The routing policy: in force at the end ("" without one), the chain walked, and the whole decision.
        "policy": journey.policy.current.name if journey.policy is not None else "",
        "policy_chain": journey.policy.chain if journey.policy is not None else "",
        "policy_decision": journey.policy.as_event() if journey.policy is not None else None,
        "selection": selection,
        "target": journey.answered_by.name if journey.answered_by else None,
        "status": journey.status,
        "error_class": journey.error_class,
        "error_message": journey.error_message,
        "latency_ms": round(elapsed_s * 1000, 2),
        "ttfb_ms": None if journey.ttfb_s is None else round(journey.ttfb_s * 1000, 2),
        "usage": usage_dict(journey.usage),
        "usage_estimated": journey.usage_estimated,
        "cost_usd": journey.cost,
        "validation": journey.validation,
        "config_version": call.table.version,
        "workload": journey.contract.workload if journey.contract else None,
        "deadline_ms": journey.deadline_ms,
        "prompt_text": call.features.latest_user_text,
        "output_text": answer.text if answer is not None else "",
        "attempts": [record.as_event() for record in journey.attempts],
        # The response cache, for a request of a cached name: its outcome and, for a hit, the filling request.
        "cache": journey.cache.as_event() if journey.cache is not None else None,
    }


def _category_fields(journey: Journey) -> dict[str, Any]:
    """The category route's decision as flat event fields (empty strings when the request used none)."""
    category = journey.category
    if category is None:
        return _NO_CATEGORY
    return {"category": category.category, "category_rule": category.rule, "category_detail": category.detail,
            "category_alias": category.alias, "category_target": category.target}


_NO_CATEGORY = {"category": "", "category_rule": "", "category_detail": "", "category_alias": "",
                "category_target": ""}


def publish_event(call: Call, journey: Journey, elapsed_s: float) -> None:
    if publish is None:  # the audit app is not installed
        return
    try:
        publish(build_event(call, journey, elapsed_s))
    except Exception:  # the audit trail must never fail a request; the publisher spools what it can
        log.exception("could not hand the audit event of %s to the publisher", call.request_id)
