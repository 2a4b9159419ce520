"""URL routes: the proxy API, probes, metrics, the admin and the auditor pages."""

from __future__ import annotations

from django.apps import apps
from django.contrib import admin
from django.urls import include, path

from routing.api import probes

urlpatterns = [
    path("health", probes.health, name="health"),
    path("health/ready", probes.ready, name="ready"),
    path("", include("routing.urls")),
    path("admin/", admin.site.urls),
]

if apps.is_installed("audit"):  # the auditor pages
    urlpatterns.append(path("audit/", include("audit.urls")))

admin.site.site_header = "GoModel gateway"
admin.site.site_title = "GoModel gateway"
admin.site.index_title = "Routing configuration and audit"
