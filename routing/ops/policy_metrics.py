"""Prometheus counters of routing policies (routing.core.policies). Labels are policy names, which only the
operator configures (an unknown name is a 400 before anything is counted), and bounded outcome words."""

from __future__ import annotations

from routing.ops.metric_kinds import Counter
from routing.ops.metrics import Labelled

POLICY_DECISIONS = Labelled(
    Counter(
        "gomodel_routing_policy_decisions_total",
        "Requests routed under a routing policy, by the policy selected, the policy in force at the end and the "
        "outcome (applied: no step; fallback: one or more fallback_to steps; unmet: 503, no target qualified).",
        ["policy", "final_policy", "outcome"],
    )
)
POLICY_FALLBACK_STEPS = Labelled(
    Counter(
        "gomodel_routing_policy_fallback_steps_total",
        "fallback_to steps taken, by the policy left and the policy taken.",
        ["from_policy", "to_policy"],
    )
)
