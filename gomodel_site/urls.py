"""URL routes: the proxy API, probes, metrics, the admin and the auditor pages."""

from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

from routing import probes

urlpatterns = [
    path("health", probes.health, name="health"),
    path("health/ready", probes.ready, name="ready"),
    path("", include("routing.urls")),
    path("admin/", admin.site.urls),
]

try:  # the auditor pages, when the audit app provides them
    import audit.urls  # noqa: F401

    urlpatterns.append(path("audit/", include("audit.urls")))
except ImportError:
    pass

admin.site.site_header = "GoModel gateway"
admin.site.site_title = "GoModel gateway"
admin.site.index_title = "Routing configuration and audit"
