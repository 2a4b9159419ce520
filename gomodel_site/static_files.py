"""The ASGI application that serves ``/static/``: ServeStatic over the files ``collectstatic`` wrote.

Only requests under ``STATIC_URL`` reach it (gomodel_site/asgi.py dispatches by path), so serving static files
costs the API nothing. ServeStatic reads the file list once at start-up, answers with the gzip or Brotli
variant the client accepts, and marks content-hashed names (``base.8c3b1a2f0d4e.css``) as cacheable forever.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from django.conf import settings
from servestatic import ServeStaticASGI

log = logging.getLogger("gomodel.static")

MANIFEST_NAME = "staticfiles.json"  # what ManifestStaticFilesStorage writes into STATIC_ROOT


def static_prefix() -> str:
    """The URL path prefix of static files, with both slashes (``/static/``)."""
    return "/" + str(settings.STATIC_URL).strip("/") + "/"


def static_files_app(fallback: Any) -> ServeStaticASGI:
    """Serve the collected files under ``static_prefix()``; a path it does not hold goes to ``fallback``."""
    root = Path(settings.STATIC_ROOT)
    if not (root / MANIFEST_NAME).is_file():
        # The pages that name a static file cannot be rendered without the manifest; say what to run.
        log.error(
            "static files are not collected in %s (DJANGO_STATIC_ROOT): the admin and auditor pages fail until "
            "`python manage.py collectstatic --noinput` has run",
            root,
        )
        return ServeStaticASGI(fallback)
    return ServeStaticASGI(fallback, root=root, prefix=static_prefix())
