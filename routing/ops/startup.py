"""Start-up of a gateway worker process (its shutdown is in ``routing.ops.shutdown``).

Start-up runs at import of the ASGI module, which some servers do inside their event loop; the database work
therefore runs in a helper thread that start-up waits for.
"""

from __future__ import annotations

import logging
import threading

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import IntegrityError, close_old_connections

from routing.config.runtime import runtime

log = logging.getLogger("gomodel.startup")
_started = False


def _apply_config_file(path: str) -> None:
    from routing.config.file.load import load_config_file
    from routing.config.file.schema import ConfigError

    for attempt in range(3):
        try:
            result = load_config_file(path, author=f"GOMODEL_CONFIG:{path}")
            if result.changed:
                log.info("GOMODEL_CONFIG %s applied: configuration version %d", path, result.version)
            return
        except ConfigError as exc:
            raise ImproperlyConfigured(
                f"GOMODEL_CONFIG: {path} was not applied:\n  " + "\n  ".join(exc.problems)
            ) from None
        except IntegrityError:
            # Several worker processes applied the same file at once; the next try sees their result.
            if attempt == 2:
                raise
        finally:
            close_old_connections()


def _start() -> None:
    if settings.GOMODEL_CONFIG:
        _apply_config_file(settings.GOMODEL_CONFIG)
    runtime.start()
    table = runtime.table()
    if not table.tier_routes:
        log.info("smart tier routing is idle: no tier routes are configured")
    elif not table.settings.smart_routing_enabled:
        log.info("smart tier routing is off (PRO_SMART_ROUTING_ENABLED=false)")
    warn_about_access(has_keys=bool(table.keys_by_hash) or not runtime.loaded)  # unknown until loaded


def warn_about_access(*, has_keys: bool) -> None:
    """Say loudly at start-up when /v1 serves requests without a key, or when it refuses every request."""
    if settings.GOMODEL_AUTH == "open":
        log.warning(
            "GOMODEL_AUTH=open: /v1 SERVES REQUESTS WITHOUT A GATEWAY KEY from this machine (loopback peers "
            "without a forwarding header). Meant for the demo and local use: set GOMODEL_AUTH=keys (the "
            "default) before anyone else can reach this gateway, even through a proxy."
        )
    elif not has_keys:
        log.warning(
            "NO GATEWAY KEY IS CONFIGURED: /v1 answers 401 to every request until one exists. Set "
            "GOMODEL_MASTER_KEY, run `manage.py createkey NAME`, or create a key in the admin."
        )


def start_gateway() -> None:
    """Apply GOMODEL_CONFIG, load the routing table and start the reload thread (once per process)."""
    global _started
    if _started:
        return
    _started = True
    errors: list[BaseException] = []

    def run() -> None:
        try:
            _start()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread below
            errors.append(exc)

    thread = threading.Thread(target=run, name="gomodel-startup")
    thread.start()
    thread.join()
    if errors:
        raise errors[0]
