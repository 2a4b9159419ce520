"""The per-process runtime: compile the Django models into a RoutingTable and hot-swap it on change.

The request path calls ``current_table()``, which returns one reference and never touches the database.
A daemon thread polls the configuration version (one tiny query every GOMODEL_CONFIG_POLL_SECONDS) and,
when it moved, compiles a new table and swaps the reference. A request in flight keeps the table it
started with, so a change never fails it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping

from django.conf import settings
from django.db import close_old_connections

from routing import models as m
from routing.clients import gcp_tokens
from routing.clients.egress import egress
from routing.config.file.caches import compile_caches
from routing.config.file.category_routes import compile_category_routes
from routing.config.file.contracts import compile_contracts
from routing.config.file.policies import compile_routing_policies
from routing.config.file.provider_models import compile_models
from routing.config.file.providers import compile_providers
from routing.config.file.routing_settings import compile_routing_settings
from routing.config.file.teams import compile_limits, compile_teams
from routing.config.file.tier_routes import compile_tier_routes
from routing.config.file.virtual_models import compile_virtual_models
from routing.core.table import KeySpec, RoutingTable, TeamSpec

log = logging.getLogger("gomodel.runtime")


def compile_table(version: int) -> RoutingTable:
    """A RoutingTable from the database as it is now (runs in a thread, never on the event loop).

    Each section's module compiles its own rows (routing.config.file); the gateway keys are not in the file.
    """
    providers = compile_providers()
    models = compile_models({p.name for p in providers})
    contracts = compile_contracts()
    virtual = compile_virtual_models()
    tier_routes = compile_tier_routes()
    category_routes = compile_category_routes()
    policies = compile_routing_policies()
    keys = compile_keys(compile_teams())
    return RoutingTable.build(
        version=version,
        providers=providers,
        models=models,
        virtual_models=virtual,
        tier_routes=tier_routes,
        category_routes=category_routes,
        policies=policies,
        contracts=contracts,
        keys=keys,
        settings=compile_routing_settings(),
        caches=compile_caches(),
    )


def compile_keys(teams: Mapping[int, TeamSpec]) -> list[KeySpec]:
    """The gateway keys not revoked, each with its team (by row id), and the master key when one is set."""
    keys = [
        KeySpec(
            id=row.id,
            name=row.name,
            secret_hash=row.secret_hash,
            allowed_models=frozenset(row.allowed_models or []),
            expires_at=None if row.expires_at is None else row.expires_at.timestamp(),
            revoked=row.revoked,
            limits=compile_limits(row),
            team=teams.get(row.team_id) if row.team_id is not None else None,
        )
        for row in m.GatewayKey.objects.filter(revoked=False)
    ]
    if settings.GOMODEL_MASTER_KEY:
        keys.append(KeySpec(id=0, name="master", secret_hash=m.hash_secret(settings.GOMODEL_MASTER_KEY),
                            is_master=True))
    return keys


class Runtime:
    """Holds this process's RoutingTable and keeps it fresh."""

    def __init__(self) -> None:
        self._table: RoutingTable | None = None
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self.last_error: str | None = None

    @property
    def loaded(self) -> bool:
        return self._table is not None

    def table(self) -> RoutingTable:
        table = self._table
        if table is None:
            return RoutingTable()
        return table

    def swap(self, table: RoutingTable) -> None:
        """Replace the table in one reference assignment; requests in flight keep the one they started with."""
        self._table = table

    def reload_if_changed(self) -> bool:
        """Compile and swap when the stored version differs from ours; True when it swapped."""
        from routing.config.versioning import current_version

        with self._lock:
            try:
                version = current_version()
                if self._table is not None and version == self._table.version:
                    return False
                table = compile_table(version)
                # TLS files are read here, off the request path, and again at every change (rotated files).
                for problem in egress.prepare(table.providers.values()):
                    log.error("TLS files of %s: its attempts fail without being sent", problem)
                # Vertex AI providers' access tokens start being fetched now, in their own threads.
                gcp_tokens.sources.prepare(table.providers.values())
                self.swap(table)
                self.last_error = None
                log.info("routing table version %d loaded", version)
                return True
            except Exception as exc:  # noqa: BLE001 - keep serving the previous table; say why on /health/ready
                self.last_error = f"{type(exc).__name__}: {exc}"
                log.error("cannot reload the routing table: %s", self.last_error)
                return False
            finally:
                close_old_connections()

    def start(self) -> None:
        """Load once (in a thread: the caller may be inside an event loop), then poll in the background."""
        if self._thread is not None:
            return
        first = threading.Thread(target=self.reload_if_changed, name="gomodel-config-load")
        first.start()
        first.join(timeout=60)
        self._thread = threading.Thread(target=self._poll, name="gomodel-config-poll", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _poll(self) -> None:
        interval = settings.GOMODEL_CONFIG_POLL_SECONDS
        while not self._stop.wait(interval):
            self.reload_if_changed()


runtime = Runtime()


def current_table() -> RoutingTable:
    return runtime.table()
