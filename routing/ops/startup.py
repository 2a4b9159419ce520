"""Start-up and shutdown of a gateway worker process.

Start-up runs at import of the ASGI module, which some servers do inside their event loop; the database work
therefore runs in a helper thread that start-up waits for.
"""

from __future__ import annotations

import functools
import ipaddress
import logging
import threading

from django.apps import apps
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import IntegrityError, close_old_connections

from routing.config.runtime import runtime

log = logging.getLogger("gomodel.startup")
_started = False


def _apply_config_file(path: str) -> None:
    from routing.config.file import ConfigError, load_config_file

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
    if not table.keys_by_hash:
        log.warning(
            "NO GATEWAY KEY IS CONFIGURED: the API is open to anyone who can reach it and answers loopback "
            "clients only. Set GOMODEL_MASTER_KEY or create a key in the admin before exposing it."
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
        except BaseException as exc:  # re-raised in the caller's thread below
            errors.append(exc)

    thread = threading.Thread(target=run, name="gomodel-startup")
    thread.start()
    thread.join()
    if errors:
        raise errors[0]


async def stop_gateway() -> None:
    """Flush what must not be lost (audit) and close upstream connections."""
    runtime.stop()
    if not apps.is_installed("audit"):
        return
    from audit import publisher

    await _in_thread(publisher.shutdown)


async def _in_thread(func) -> None:  # type: ignore[no-untyped-def]
    from asgiref.sync import sync_to_async

    await sync_to_async(func, thread_sensitive=False)()


@functools.lru_cache(maxsize=1024)  # asked on every request in open mode; parsing an address is not free
def is_loopback(host: str | None) -> bool:
    if not host:
        return False
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"
