"""Who is calling ``/v1``: the gateway key from the request's headers, checked before any body is read.

``GOMODEL_AUTH`` alone decides the mode; the key snapshot never does:

- ``keys`` (the default) serves only a request with a valid key (``Authorization: Bearer <key>`` or
  ``x-api-key: <key>``). While no key exists every request is a 401 that says how to create one, so
  revoking or deleting the last key closes a running gateway instead of opening it.
- ``open`` also serves a request *without a valid key* when its TCP peer (the ASGI scope's ``client``) is a
  loopback address and it carries no forwarding header: behind a reverse proxy on the same machine every
  remote client would otherwise look local. A forwarded header is never believed, only refused. A valid
  key is still recognised (its model list and its ledger scope apply); anything else a local client sends
  as a key is ignored, since the OpenAI and Anthropic SDKs refuse to start without one. Any other peer
  needs a valid key, exactly as in ``keys`` mode.

The relay handler and the Django handler authenticate from the ASGI scope before they read a body and hand
the ``Caller`` to the view on the request (``CALLER_ATTRIBUTE``); a view reached any other way (Django's test
client) authenticates from the request itself with the same rules.
"""

from __future__ import annotations

import functools
import ipaddress
import time
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.http import HttpRequest

from routing.core.table import KeySpec, RoutingTable
from routing.gateway.gateway_error import GatewayError
from routing.models import hash_secret

CALLER_ATTRIBUTE = "gateway_caller"
OPEN_SCOPE = "open"
SEND_IT = "send it as `Authorization: Bearer <key>` or `x-api-key: <key>`"
HOW_TO_CREATE = (
    "Create one with GOMODEL_MASTER_KEY, with `python manage.py createkey NAME`, or in the admin "
    "(/admin/routing/gatewaykey/)"
)
_FORWARDING_HEADERS = frozenset({b"forwarded", b"x-forwarded-for", b"x-real-ip"})
_FORWARDING_META = ("HTTP_FORWARDED", "HTTP_X_FORWARDED_FOR", "HTTP_X_REAL_IP")


@dataclass(frozen=True, slots=True)
class Caller:
    """An authenticated caller: its gateway key, or None when served without one (``GOMODEL_AUTH=open``)."""

    key: KeySpec | None

    @property
    def scope(self) -> str:
        """Whose stored data this caller may see (ledger entries): the key's id, or ``open`` without a key."""
        return OPEN_SCOPE if self.key is None else str(self.key.id)


OPEN_CALLER = Caller(None)


def caller_from_scope(scope: dict[str, Any], table: RoutingTable) -> Caller:
    """The caller of an ASGI request, from its headers and TCP peer alone; raises a 401 ``GatewayError``."""
    bearer = api_key = ""
    forwarded = False
    for raw_name, value in scope.get("headers", ()):
        name = raw_name.lower()
        if name == b"authorization":
            bearer = _bearer_token(value.decode("latin-1"))
        elif name == b"x-api-key":
            api_key = value.decode("latin-1").strip()
        elif name in _FORWARDING_HEADERS:
            forwarded = True
    client = scope.get("client")
    return authenticate(bearer or api_key, peer=client[0] if client else None, forwarded=forwarded, table=table)


def caller_of(request: HttpRequest, table: RoutingTable) -> Caller:
    """The caller the handler authenticated before reading the body, or authenticated now from the request."""
    caller = getattr(request, CALLER_ATTRIBUTE, None)
    if isinstance(caller, Caller):
        return caller
    meta = request.META
    token = _bearer_token(meta.get("HTTP_AUTHORIZATION", "")) or meta.get("HTTP_X_API_KEY", "").strip()
    forwarded = any(name in meta for name in _FORWARDING_META)
    return authenticate(token, peer=meta.get("REMOTE_ADDR"), forwarded=forwarded, table=table)


def authenticate(token: str, *, peer: str | None, forwarded: bool, table: RoutingTable) -> Caller:
    """The caller presenting ``token`` (may be empty) from TCP peer ``peer``; raises a 401 ``GatewayError``."""
    key, refusal = _valid_key(token, table)
    if key is not None:
        return Caller(key)
    if settings.GOMODEL_AUTH == "open" and not forwarded and is_loopback(peer):
        return OPEN_CALLER  # whatever it sent: the SDKs insist on sending some key, and the demo says "unused"
    raise _unauthorized(refusal)


def _valid_key(token: str, table: RoutingTable) -> tuple[KeySpec | None, str]:
    """The table's live key for ``token``, or None and the reason to give the client."""
    key = table.keys_by_hash.get(hash_secret(token)) if token else None
    if key is not None and not key.revoked:
        if key.expires_at is not None and key.expires_at <= time.time():
            return None, "This gateway key has expired."
        return key, ""
    return None, _refusal(sent=bool(token), open_mode=settings.GOMODEL_AUTH == "open",
                          has_keys=bool(table.keys_by_hash))


def _refusal(*, sent: bool, open_mode: bool, has_keys: bool) -> str:
    if not has_keys:
        effect = "it serves only clients on its own machine" if open_mode else "it refuses every request"
        return f"This gateway has no key configured, so {effect}. {HOW_TO_CREATE}, then {SEND_IT}."
    if not sent:
        local = " (without one, this gateway serves only clients on its own machine, not through a proxy)"
        return f"Missing gateway key{local if open_mode else ''}: {SEND_IT}."
    return "Invalid gateway key."


def _unauthorized(message: str) -> GatewayError:
    return GatewayError(401, message, code="invalid_api_key", headers={"WWW-Authenticate": 'Bearer realm="gomodel"'},
                        error_class="permanent")


def _bearer_token(header: str) -> str:
    header = header.strip()
    return header[7:].strip() if header[:7].lower() == "bearer " else ""


@functools.lru_cache(maxsize=1024)  # asked on every keyless request in open mode; parsing is not free
def is_loopback(host: str | None) -> bool:
    """Whether ``host`` (a TCP peer's address) is this machine: 127.0.0.0/8, ::1 or an IPv4-mapped loopback."""
    if not host:
        return False
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False  # a Unix socket path or a name: not an address we can vouch for
    mapped = getattr(address, "ipv4_mapped", None)
    return bool(address.is_loopback or (mapped is not None and mapped.is_loopback))

