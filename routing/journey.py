"""The two records of one request: ``Call`` (what the client sent, as read once) and ``Journey`` (everything
decided while serving it, which feeds the response headers, the metrics and the audit event)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from routing.attempt import AttemptRecord
from routing.core.answer import Answer, Usage
from routing.core.contracts import EffectiveContract
from routing.core.features import Features
from routing.core.table import KeySpec, ModelSpec, RoutingTable
from routing.planning import Plan
from routing.providers.errors import Inbound
from routing.tiers import TierDecision


@dataclass
class Call:
    """One client request as the engine sees it."""

    request_id: str
    inbound: Inbound
    key: KeySpec | None
    body: dict[str, Any]
    features: Features
    headers: Mapping[str, str]  # lower-case names
    table: RoutingTable
    started: float = field(default_factory=time.monotonic)
    started_unix: float = field(default_factory=time.time)
    session: Any = None  # routing.core.sessions.SessionId, detected once when first needed

    @property
    def key_scope(self) -> int | str:
        return self.key.id if self.key is not None else "open"


@dataclass
class Journey:
    """Everything decided for one request; feeds the headers, the metrics and the audit event."""

    requested_model: str
    endpoint: str
    tier: TierDecision | None = None
    target_name: str = ""
    contract: EffectiveContract | None = None
    plan: Plan | None = None
    attempts: list[AttemptRecord] = field(default_factory=list)
    answered_by: ModelSpec | None = None
    usage: Usage | None = None
    cost: float | None = None
    ttfb_s: float | None = None
    status: int = 200
    error_class: str | None = None
    error_message: str | None = None
    validation: str = "not_run"
    answer: Answer | None = None
    deadline_ms: int | None = None
    operation_id: str | None = None
    replay_blob: bytes | None = None  # what a repeat of this idempotent request gets back

    def headers(self, request_id: str) -> dict[str, str]:
        out = {"X-Request-Id": request_id}
        if self.tier is not None:
            out["X-GoModel-Pro-Tier"] = self.tier.tier
            out["X-GoModel-Pro-Tier-Target"] = self.tier.target
            out["X-GoModel-Pro-Tier-Score"] = str(self.tier.score)
        if self.answered_by is not None:
            out["X-GoModel-Target"] = self.answered_by.name
        out["X-GoModel-Attempts"] = str(len(self.attempts))
        if self.cost is not None:
            out["X-GoModel-Cost-Usd"] = f"{self.cost:.8f}"
        if self.operation_id:
            out["X-GoModel-Operation-Id"] = self.operation_id
        return out
