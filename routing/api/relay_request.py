"""The Django request of a relay endpoint, built with fewer steps than ``ASGIRequest.__init__``.

``ASGIRequest.__init__`` decodes, upper-cases and rewrites every header name into its ``META`` key, collects the
values in a ``defaultdict`` and joins each list, and parses the content type through
``parse_header_parameters``: about 35 Python calls for a request of the OpenAI SDK. ``RelayRequest`` gives the
same object (the same ``META``, path, method, content type and stream; ``GET``, ``COOKIES``, ``POST`` and the
rest inherited from ``ASGIRequest``) with the ``META`` key of each header name kept in a bounded table, a
repeated header joined in place, and the common content type (``application/json`` without parameters)
recognised without the parser. tests/api/test_relay_request.py holds it to ``ASGIRequest`` field by field.
"""

from __future__ import annotations

import io
from typing import Any

from django.core.handlers.asgi import ASGIRequest

from routing.ops.settings_cache import cached_settings

# META key and lower-case name (as views.client_headers spells it from the META key) by raw header name; None
# for a name with "_", which Django leaves out (an "x_api_key" header must not pass for "x-api-key"). Header
# names are the client's, so the table stops growing at this size and any further name is computed each time.
MAX_KNOWN_NAMES = 512
_META_KEYS: dict[bytes, tuple[str, str] | None] = {}


def _meta_key(raw_name: bytes) -> tuple[str, str] | None:
    name = raw_name.decode("latin-1")
    names: tuple[str, str] | None
    if "_" in name:
        names = None
    elif name == "content-length":
        names = "CONTENT_LENGTH", "content-length"
    elif name == "content-type":
        names = "CONTENT_TYPE", "content-type"
    else:
        key = "HTTP_" + name.upper().replace("-", "_")
        names = key, header_name(key[5:])
    if len(_META_KEYS) < MAX_KNOWN_NAMES:
        _META_KEYS[raw_name] = names
    return names


def header_name(meta_name: str) -> str:
    """The lower-case header name of a META key without its ``HTTP_`` prefix (``X_API_KEY``, ``CONTENT_TYPE``),
    as Django's ``HttpHeaders`` spells it, lowered (``title()`` first: ``lower()`` alone differs for "ß")."""
    return meta_name.replace("_", "-").title().lower()


class RelayRequest(ASGIRequest):
    def __init__(self, scope: dict[str, Any], body: bytes) -> None:
        self.scope = scope
        self._post_parse_error = False
        self._read_started = False
        self.resolver_match = None
        path = self.path = scope["path"]
        script_name = self.script_name = cached_settings.FORCE_SCRIPT_NAME or scope.get("root_path", "") or ""
        self.path_info = path.removeprefix(script_name) if script_name else path
        method = self.method = scope["method"].upper()
        query_string = scope.get("query_string", "")
        if isinstance(query_string, bytes):
            query_string = query_string.decode()
        meta: dict[str, Any] = {
            "REQUEST_METHOD": method,
            "QUERY_STRING": query_string,
            "SCRIPT_NAME": script_name,
            "PATH_INFO": self.path_info,
            "wsgi.multithread": True,
            "wsgi.multiprocess": True,
        }
        client = scope.get("client")
        if client:
            meta["REMOTE_ADDR"] = meta["REMOTE_HOST"] = client[0]
            meta["REMOTE_PORT"] = client[1]
        server = scope.get("server")
        if server:
            meta["SERVER_NAME"] = server[0]
            meta["SERVER_PORT"] = str(server[1])
        else:
            meta["SERVER_NAME"] = "unknown"
            meta["SERVER_PORT"] = "0"
        # Header keys (HTTP_*, CONTENT_*) never meet the keys above, so a key already present is a repeat.
        known = _META_KEYS
        lower_headers: dict[str, str] = {}
        for raw_name, raw_value in scope.get("headers", ()):
            try:
                names = known[raw_name]
            except KeyError:
                names = _meta_key(raw_name)
            if names is None:
                continue
            key, lower = names
            value = raw_value.decode("latin-1")
            if key in meta:
                value = meta[key] = meta[key] + "," + value
            else:
                meta[key] = value
            lower_headers[lower] = value
        self.META = meta
        # What views.client_headers reads from META, collected on the way.
        self.lower_headers = lower_headers
        content_type = meta.get("CONTENT_TYPE", "")
        if content_type == "application/json":
            self.content_type, self.content_params = content_type, {}
        else:
            self._set_content_type_params(meta)  # type: ignore[attr-defined]  # Django's own parser; not in its stubs
        self._stream = io.BytesIO(body)
