"""URL routes: the proxy API, probes, metrics, the admin and the auditor pages."""

from __future__ import annotations

from django.apps import apps
from django.contrib import admin
from django.urls import include, path
from django.views.generic import RedirectView

from routing import playground
from routing.api import probes
from routing.dashboard import dashboard_view

urlpatterns = [
    path("health", probes.health, name="health"),
    path("health/ready", probes.ready, name="ready"),
    path("", RedirectView.as_view(pattern_name="admin:index"), name="home"),  # the operator's console
    path("", include("routing.urls")),
    path("admin/", admin.site.admin_view(dashboard_view), name="dashboard"),  # before the admin's own index
    *playground.urls(),  # /admin/playground/: before the admin's own catch-all
    path("admin/", admin.site.urls),
]

if apps.is_installed("audit"):  # the auditor pages
    urlpatterns.append(path("audit/", include("audit.urls")))

admin.site.site_header = "GoModel gateway"
admin.site.site_title = "GoModel gateway"
admin.site.index_title = "Routing configuration and audit"
admin.site.site_url = "/audit/"  # the header's "View site": the auditor pages
