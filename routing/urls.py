"""The gateway's client API (OpenAI- and Anthropic-compatible) and the metrics endpoint."""

from __future__ import annotations

from django.urls import path

urlpatterns: list = []
