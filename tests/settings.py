"""Settings for the test suite: the production settings with test defaults for the environment.

Tests run against a real PostgreSQL (pytest-django creates ``test_gomodel`` beside ``gomodel``).
"""

import os

os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/gomodel")
os.environ.setdefault("GOMODEL_CONFIG_POLL_SECONDS", "0.2")

from gomodel_site.settings import *  # noqa: E402,F403
