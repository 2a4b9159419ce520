"""Run ``collectstatic`` for the demo only when the static sources changed since the last run.

Collecting hashes, rewrites and compresses (gzip and Brotli) every file of the admin: about five seconds on two
cores even when nothing changed. The demo starts many times on the same files, so it collects once and then
only when a source file was added, removed or modified, or the collected files are gone.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import servestatic
from django.apps import apps
from django.conf import settings
from django.contrib.staticfiles import finders
from django.core.management import call_command

STAMP_NAME = ".sources-fingerprint"  # beside the manifest in STATIC_ROOT


def static_sources_fingerprint() -> str:
    """A hash of every static source file's name, size and modification time, and of how they are collected."""
    ignore_patterns = apps.get_app_config("staticfiles").ignore_patterns
    digest = hashlib.sha256(f"{settings.STORAGES['staticfiles']} servestatic {servestatic.__version__}".encode())
    entries = []
    for finder in finders.get_finders():
        for path, storage in finder.list(ignore_patterns):
            stat = os.stat(storage.path(path))
            prefix = getattr(storage, "prefix", None) or ""
            entries.append(f"{prefix}/{path}\0{stat.st_size}\0{stat.st_mtime_ns}")
    for entry in sorted(entries):
        digest.update(entry.encode("utf-8", "surrogateescape") + b"\n")
    return digest.hexdigest()


def collect_static_when_changed() -> bool:
    """Collect the static files into STATIC_ROOT unless they are current; whether it collected."""
    root = Path(settings.STATIC_ROOT)
    stamp = root / STAMP_NAME
    fingerprint = static_sources_fingerprint()
    manifest = root / "staticfiles.json"
    if manifest.is_file() and stamp.is_file() and stamp.read_text() == fingerprint:
        return False
    call_command("collectstatic", interactive=False, verbosity=0)
    stamp.write_text(fingerprint)
    return True
