"""The Celery application that carries audit events to the database.

Start a worker with ``celery -A gomodel_site worker``. Configuration comes from Django settings
(``CELERY_*``); without ``CELERY_BROKER_URL`` the gateway writes audit events in-process instead.
"""

from __future__ import annotations

import os

from celery import Celery
from django.conf import settings

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gomodel_site.settings")

# Celery's own --loglevel default is WARNING, at which a worker and beat say nothing of the tasks they receive
# and run. Its command line takes a flag's default from CELERY_<COMMAND>_<FLAG> (click's auto_envvar_prefix), read
# after this module is imported by `-A gomodel_site`: so they log at the gateway's GOMODEL_LOG_LEVEL (info), and
# an explicit --loglevel still wins.
for _command in ("WORKER", "BEAT"):
    os.environ.setdefault(f"CELERY_{_command}_LOGLEVEL", settings.LOG_LEVEL)

app = Celery("gomodel_site")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(["audit", "routing"])
