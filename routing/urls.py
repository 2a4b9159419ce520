"""The gateway's client API (OpenAI- and Anthropic-compatible) and the metrics endpoint."""

from __future__ import annotations

from django.urls import path, re_path

from routing.api import ledger, views
from routing.ops import metrics

urlpatterns = [
    path("v1/chat/completions", views.chat_completions, name="chat-completions"),
    path("v1/messages", views.messages, name="messages"),
    path("v1/messages/count_tokens", views.count_tokens, name="messages-count-tokens"),
    path("v1/embeddings", views.embeddings, name="embeddings"),
    path("v1/responses", views.responses, name="responses"),
    path("v1/models", views.models, name="models"),
    path("v1/routing/explain", views.explain, name="routing-explain"),
    path("metrics", metrics.metrics_view, name="metrics"),
    path("v1/openapi.json", views.openapi, name="openapi"),
    path("v1/ledger/<str:action>", ledger.ledger, name="ledger"),
    # [\s\S], not ".": a key or path with an encoded newline (%0A) still gets the client's JSON envelope.
    re_path(r"^v1/ledger/entry/(?P<key>[\s\S]+)$", ledger.ledger_get, name="ledger-entry"),
    re_path(r"^v1/(?P<path>[\s\S]*)$", views.not_found),
]
