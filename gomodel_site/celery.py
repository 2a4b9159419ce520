"""The Celery application that carries audit events to the database.

Start a worker with ``celery -A gomodel_site worker``. Configuration comes from Django settings
(``CELERY_*``); without ``CELERY_BROKER_URL`` the gateway writes audit events in-process instead.
"""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gomodel_site.settings")

app = Celery("gomodel_site")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(["audit", "routing"])
