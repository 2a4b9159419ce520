"""Celery beat's scheduler with its schedule file's folder created first.

Beat keeps when each periodic task last ran in a shelve file (``CELERY_BEAT_SCHEDULE_FILENAME``: ``var/`` by
default, never the folder beat happens to start in). Celery's own scheduler expects the folder to exist and,
when it does not, takes the failure for a corrupt file and stops; a first start in a fresh checkout or an empty
volume would then fail.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from celery.beat import PersistentScheduler


class SchedulerInVar(PersistentScheduler):
    def _open_schedule(self) -> Any:
        Path(self.schedule_filename).parent.mkdir(parents=True, exist_ok=True)
        return super()._open_schedule()
