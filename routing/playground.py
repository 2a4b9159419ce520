"""``/admin/playground/``: send a chat to any configured name, as staff or as a gateway key, and see the decision.

The page's script (routing/static/routing/playground.js) sends the chat to the gateway's own
``POST /v1/chat/completions`` with ``stream: true``, so what it shows is what a client gets: the same parsing,
key limits, model access, routing, fallbacks and audit. It authenticates with a short-lived token this module
issues to the staff session (routing.api.playground_token): a key's secret is never known here (it is stored
hashed) and never reaches the page. Issuing a token is a POST under Django's CSRF protection, so another site
cannot get one with the operator's cookies; the gateway's ``/v1`` takes the token only from the Authorization
header, which a page of another origin cannot make the browser send with its cookies.

Sending needs the permission to change gateway keys (whoever has it can create a key of any kind anyway); the
decision read back from the audit needs the auditor's permission to view revisions as well.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from django.contrib import admin
from django.contrib.auth.decorators import permission_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.views.decorators.http import require_GET, require_POST

from audit.playground import decision_of
from audit.selectors import revision_detail
from routing.api.playground_token import STAFF, TOKEN_TTL_S, keys_by_id, mint_token
from routing.config.runtime import current_table
from routing.core.table import KeySpec, RoutingTable

log = logging.getLogger("gomodel.playground")

SEND_PERMISSION = "routing.change_gatewaykey"
VIEW_REVISIONS = "audit.view_auditrevision"
NAME_GROUPS = (("tier", "Tier aliases"), ("category", "Category routes"), ("virtual", "Virtual models"),
               ("model", "Models"))


def name_groups(table: RoutingTable) -> list[dict[str, Any]]:
    """The names a chat may be sent to, by kind (tier aliases first), each serving chat; aliases left out."""
    aliases = table.model_aliases()
    groups: dict[str, list[str]] = {kind: [] for kind, _label in NAME_GROUPS}
    for name in table.public_names():
        kind = table.kind_of(name)
        if kind is None or name in aliases or "chat" not in table.endpoints_of(name):
            continue
        groups[kind].append(name)
    return [{"kind": kind, "label": label, "names": sorted(groups[kind])} for kind, label in NAME_GROUPS
            if groups[kind]]


def _limits_label(key: KeySpec) -> str:
    limits = key.limits
    parts = [f"{limits.rpm} rpm" if limits.rpm else "", f"{limits.tpm} tpm" if limits.tpm else "",
             f"{limits.max_concurrency} at once" if limits.max_concurrency else "",
             f"${limits.budget_usd:g}/{limits.budget_period}" if limits.budget_usd is not None else ""]
    return ", ".join(p for p in parts if p)


def live_keys(table: RoutingTable) -> dict[int, KeySpec]:
    """The keys the table serves now by id: neither revoked nor expired (the master key left out)."""
    now = time.time()
    return {key_id: key for key_id, key in keys_by_id(table).items()
            if not key.revoked and (key.expires_at is None or key.expires_at > now)}


def key_choices(table: RoutingTable) -> list[dict[str, str]]:
    """The gateway keys the table serves (the master key left out), with what limits them, by name."""
    out = []
    for key in sorted(live_keys(table).values(), key=lambda k: k.name):
        details = [f"team {key.team_name}" if key.team is not None else "",
                   "models: " + ", ".join(sorted(key.allowed_models)) if key.allowed_models else "",
                   _limits_label(key)]
        label = key.name + "".join(f"; {d}" for d in details if d)
        out.append({"value": str(key.id), "label": label})
    return out


def _policies(table: RoutingTable) -> list[str]:
    return sorted(table.policies)


@permission_required(SEND_PERMISSION, raise_exception=True)
@require_GET
def playground_view(request: HttpRequest) -> HttpResponse:
    """The page: the caller, the name, the chat, and where the answer and the decision appear."""
    table = current_table()
    context = {
        **admin.site.each_context(request),
        "title": "Playground",
        "subtitle": None,
        "names": name_groups(table),
        "keys": key_choices(table),
        "policies": _policies(table),
        "can_view_audit": request.user.has_perm(VIEW_REVISIONS),
        "token_ttl_s": TOKEN_TTL_S,
        "config": {"tokenUrl": reverse("playground-token"), "chatUrl": reverse("chat-completions"),
                   "decisionUrl": reverse("playground-decision", args=["REQUEST_ID"]),
                   "canViewAudit": request.user.has_perm(VIEW_REVISIONS)},
    }
    return TemplateResponse(request, "admin/playground.html", context)


def _refusal(status: int, message: str, field: str) -> JsonResponse:
    return JsonResponse({"error": {"message": message, "field": field}}, status=status)


@permission_required(SEND_PERMISSION, raise_exception=True)
@require_POST
def token_view(request: HttpRequest) -> JsonResponse:
    """A token for one caller: ``as=staff`` or ``as=<key id>`` (a key the table in force serves)."""
    chosen = request.POST.get("as", "").strip()
    username = request.user.get_username()
    if chosen == STAFF:
        log.info("playground token issued to %s as staff", username)
        return JsonResponse({"token": mint_token(key_id=None, username=username), "expires_in": TOKEN_TTL_S,
                             "caller": f"playground:{username}"})
    if not chosen.isdigit():
        return _refusal(400, f"as: expected {STAFF!r} or a gateway key's id, got {chosen[:40]!r}.", "as")
    key = live_keys(current_table()).get(int(chosen))
    if key is None:
        return _refusal(400, f"as: no live gateway key has the id {chosen}; it may be revoked, expired or not yet "
                             "loaded (reload the page).", "as")
    # The audit names the key; this line names who sent as it (the token names the user too).
    log.info("playground token issued to %s as the gateway key %s (id %d)", username, key.name, key.id)
    return JsonResponse({"token": mint_token(key_id=key.id, username=username), "expires_in": TOKEN_TTL_S,
                         "caller": key.name})


@permission_required(SEND_PERMISSION, raise_exception=True)
@permission_required(VIEW_REVISIONS, raise_exception=True)
@require_GET
def decision_view(request: HttpRequest, request_id: str) -> JsonResponse:
    """The stored decision of one request, or ``{"stored": false}`` while the audit has not written it yet."""
    found = revision_detail(request_id[:64])
    if found is None:
        return JsonResponse({"stored": False})
    revision, attempts, _config = found
    decision = decision_of(revision, attempts)
    decision["revision_url"] = reverse("audit:revision", args=[revision.request_id])
    return JsonResponse({"stored": True, "decision": decision})


def urls() -> list[Any]:
    """The playground's routes, mounted under /admin/ before the admin's own (staff only, CSRF-protected)."""
    wrap = admin.site.admin_view
    return [
        path("admin/playground/", wrap(playground_view), name="playground"),
        path("admin/playground/token/", wrap(token_view), name="playground-token"),
        path("admin/playground/decision/<str:request_id>/", wrap(decision_view), name="playground-decision"),
    ]
