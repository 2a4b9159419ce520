"""WSGI entry point, for the admin only; the proxy endpoints need ASGI (gomodel_site.asgi)."""

from __future__ import annotations

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gomodel_site.settings")
application = get_wsgi_application()
