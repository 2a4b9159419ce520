"""Settings for the test suite: the production settings with test defaults for the environment.

Tests run against a real PostgreSQL: pytest-django creates ``test_gomodel_<checkout>`` beside
``gomodel_<checkout>``, where ``<checkout>`` is a hash of this checkout's path, so that test runs of two
checkouts on one machine (each drops and creates its test database) never share one.
"""

import hashlib
import os
import tempfile
from pathlib import Path

_CHECKOUT = hashlib.sha256(str(Path(__file__).resolve().parent.parent).encode()).hexdigest()[:8]
os.environ.setdefault("DATABASE_URL", f"postgres://postgres@127.0.0.1:5432/gomodel_{_CHECKOUT}")
os.environ.setdefault("AUDIT_SPOOL_DIR", tempfile.mkdtemp(prefix="gomodel-test-spool-"))
os.environ.setdefault("GOMODEL_CONFIG_POLL_SECONDS", "0.2")
# Production refuses to start without a secret key; the tests, and the gateway processes they start (which
# inherit this environment), run with one made up for them rather than the demo's public fallback.
os.environ.setdefault("DJANGO_SECRET_KEY", "tests-only-secret-key-" + "0123456789abcdefghijklmnopqrstuvwxyz")

from gomodel_site.settings import *  # noqa: F403, E402 - after the environment defaults above

# The test process itself opens connections from helper threads (readiness probe, ledger); a pool would keep
# them open and block the test database's teardown. Gateway subprocesses keep the production pool.
DATABASES["default"]["OPTIONS"].pop("pool", None)  # noqa: F405

# Pages rendered by Django's test client name static files by their plain names: the manifest exists only
# after collectstatic, which the browser test (tests/browser) and the demo run against real servers.
STORAGES = {**STORAGES, "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}}  # noqa: F405
