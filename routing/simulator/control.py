"""The control endpoints under ``/_sim/``: faults, received requests, counters and reset, over HTTP.

======  ==================  =============================================================================
method  path                does
======  ==================  =============================================================================
POST    ``/_sim/faults``    ``{"model": m, "fault": {...}}`` (or ``"faults": [...]`` for a script; or
                            ``"deployment"``, ``"path"`` or ``"key"`` instead of ``"model"``): replace
                            the script for that key
GET     ``/_sim/faults``    the active scripts with each fault's remaining ``times``
DELETE  ``/_sim/faults``    clear every script, or one with ``?model=`` (``?key=``, ``?deployment=``, ...)
GET     ``/_sim/requests``  the recorded requests, oldest first; ``?model=`` filters, ``?limit=`` keeps
                            the newest N
GET     ``/_sim/stats``     totals, requests in flight, and per-model counters
POST    ``/_sim/reset``     back to the configured start (faults, records, counters, cache)
GET     ``/_sim/health``    ``{"status": "ok"}``
======  ==================  =============================================================================
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qsl

from routing.simulator.asgi_io import BodyTooLarge, Connection
from routing.simulator.faults import FaultError
from routing.simulator.state import SimulatorState

_JSON = (b"content-type", b"application/json")
_KEY_FIELDS = ("model", "deployment", "path", "key")


class ControlEndpoints:
    def __init__(self, state: SimulatorState) -> None:
        self.state = state

    async def handle(self, conn: Connection, method: str, path: str, query: str) -> None:
        params = dict(parse_qsl(query, keep_blank_values=True))
        try:
            body = await conn.read_body()
        except BodyTooLarge:
            await _send(conn, 413, {"error": "control request too large"})
            return
        endpoint = (method, path.rstrip("/"))
        if endpoint == ("GET", "/_sim/health"):
            await _send(conn, 200, {"status": "ok"})
        elif endpoint == ("GET", "/_sim/stats"):
            await _send(conn, 200, self.state.recorder.stats())
        elif endpoint == ("GET", "/_sim/requests"):
            await self._requests(conn, params)
        elif endpoint == ("GET", "/_sim/faults"):
            await _send(conn, 200, {"faults": self.state.faults.snapshot()})
        elif endpoint == ("POST", "/_sim/faults"):
            await self._set_fault(conn, body)
        elif endpoint == ("DELETE", "/_sim/faults"):
            key = next((params[field] for field in _KEY_FIELDS if params.get(field)), None)
            self.state.clear_faults(key)
            await _send(conn, 200, {"cleared": key or "all"})
        elif endpoint == ("POST", "/_sim/reset"):
            self.state.reset()
            await _send(conn, 200, {"reset": True})
        elif path.rstrip("/") in ("/_sim/health", "/_sim/stats", "/_sim/requests", "/_sim/faults", "/_sim/reset"):
            await _send(conn, 405, {"error": f"method {method} not allowed on {path}"})
        else:
            await _send(conn, 404, {"error": f"unknown control endpoint {path}"})

    async def _requests(self, conn: Connection, params: dict[str, str]) -> None:
        limit_text = params.get("limit")
        if limit_text is not None and not limit_text.isdigit():
            await _send(conn, 400, {"error": "limit: expected a non-negative integer"})
            return
        records = self.state.recorder.records(params.get("model") or None, int(limit_text) if limit_text else None)
        await _send(conn, 200, {"requests": records})

    async def _set_fault(self, conn: Connection, body: bytes) -> None:
        try:
            data = json.loads(body or b"null")
        except ValueError:
            await _send(conn, 400, {"error": "the body is not valid JSON"})
            return
        if not isinstance(data, dict):
            await _send(conn, 400, {"error": 'expected {"model": ..., "fault": {...}}'})
            return
        keys = [field for field in _KEY_FIELDS if isinstance(data.get(field), str) and data[field]]
        if len(keys) != 1:
            await _send(conn, 400, {"error": "name exactly one of: model, deployment, path, key"})
            return
        script = data.get("faults", data.get("fault"))
        if script is None:
            await _send(conn, 400, {"error": "fault: required (a fault mapping, or 'faults': a list)"})
            return
        key = data[keys[0]]
        try:
            faults = self.state.set_fault(key, script)
        except FaultError as exc:
            await _send(conn, 400, {"error": str(exc)})
            return
        await _send(conn, 200, {"key": key, "faults": [fault.to_dict() for fault in faults]})


async def _send(conn: Connection, status: int, payload: Any) -> None:
    body = json.dumps(payload, separators=(",", ":"), default=str).encode("utf-8")
    await conn.respond(status, [_JSON], body)
