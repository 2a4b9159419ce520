"""The auditor pages, mounted under ``/audit/`` by the project's URLconf."""

from __future__ import annotations

from django.urls import path

from audit import views

app_name = "audit"

urlpatterns = [
    path("", views.history, name="history"),
    path("requests/<str:request_id>/", views.revision, name="revision"),
    path("sessions/<str:session_hash>/", views.session, name="session"),
    path("config/", views.config_history, name="config_history"),
    path("tuning/", views.tuning_page, name="tuning"),
    path("spend/", views.spend_page, name="spend"),
    path("spend.csv", views.spend_csv, name="spend_csv"),
    path("export.csv", views.export_csv, name="export_csv"),
    path("export.jsonl", views.export_jsonl, name="export_jsonl"),
]
