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

  Served without a key, a request must also come from a *local program*, not from a web page the local user
  has open: any page can make the browser send a request to 127.0.0.1, and through DNS rebinding read the
  answer too. So its ``Host`` must be a loopback name (``localhost``, ``127.0.0.1``, ``[::1]``, any port) or
  one of ``ALLOWED_HOSTS`` (a rebound name is neither: 403); an ``Origin`` must be that same host, and
  ``Sec-Fetch-Site`` may not say ``cross-site`` or ``same-site`` (another origin: 403); and a body must be
  declared ``application/json`` (415), which a page can send to another origin only after a CORS preflight
  that this gateway never grants. curl and the SDKs send no ``Origin`` and no ``Sec-Fetch-Site``.

  Every answer served that way carries ``X-GoModel-Auth: open`` (``mark_served_open``): a client that sent a
  wrong key, or one meant for another gateway, learns that it was not checked rather than taking the 200 for
  a key accepted.

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
from urllib.parse import urlsplit

from django.http import HttpRequest, HttpResponseBase
from django.http.request import split_domain_port, validate_host

from routing.api.playground_token import TokenRefusal, is_token, key_of_token
from routing.core.table import KeySpec, RoutingTable
from routing.gateway.gateway_error import GatewayError
from routing.gateway.response_headers import set_headers
from routing.models import hash_secret
from routing.ops.settings_cache import cached_settings

CALLER_ATTRIBUTE = "gateway_caller"
OPEN_SCOPE = "open"
SEND_IT = "send it as `Authorization: Bearer <key>` or `x-api-key: <key>`"
HOW_TO_CREATE = (
    "Create one with GOMODEL_MASTER_KEY, with `python manage.py createkey NAME`, or in the admin "
    "(/admin/routing/gatewaykey/)"
)
_FORWARDING_HEADERS = frozenset({b"forwarded", b"x-forwarded-for", b"x-real-ip"})
_FORWARDING_META = ("HTTP_FORWARDED", "HTTP_X_FORWARDED_FOR", "HTTP_X_REAL_IP")
# Sec-Fetch-Site values that mean another origin sent the request (same-site: another port of localhost too).
_OTHER_ORIGIN_SITES = frozenset({"cross-site", "same-site"})
# Methods without a body: only a request with one must declare it JSON.
_BODYLESS_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_DEFAULT_PORTS = {"http": "80", "https": "443"}
OPEN_MODE = "this gateway serves requests without a gateway key (GOMODEL_AUTH=open) only from local programs"
AUTH_HEADER = "X-GoModel-Auth"
_SERVED_OPEN = {AUTH_HEADER: "open"}


@dataclass(frozen=True, slots=True)
class Caller:
    """An authenticated caller: its gateway key, or None when served without one (``GOMODEL_AUTH=open``)."""

    key: KeySpec | None

    @property
    def scope(self) -> str:
        """Whose stored data this caller may see (ledger entries): the key's id, or ``open`` without a key."""
        return OPEN_SCOPE if self.key is None else str(self.key.id)


OPEN_CALLER = Caller(None)


def mark_served_open(response: HttpResponseBase, caller: Caller | None) -> None:
    """Say on ``response`` that it was served with no key checked (``GOMODEL_AUTH=open``), whatever key was sent."""
    if caller is not None and caller.key is None:
        set_headers(response, _SERVED_OPEN)


@dataclass(frozen=True, slots=True)
class Sender:
    """What a request says about the program that sent it: its Host, Origin and Sec-Fetch-Site headers, its
    method and its Content-Type (None: the header is absent)."""

    host: str
    method: str
    origin: str | None = None
    fetch_site: str | None = None
    content_type: str | None = None


def caller_from_scope(scope: dict[str, Any], table: RoutingTable) -> Caller:
    """The caller of an ASGI request, from its headers and TCP peer alone; raises a 401, 403 or 415
    ``GatewayError``."""
    bearer = api_key = ""
    forwarded = False
    host = origin = fetch_site = content_type = None
    for raw_name, value in scope.get("headers", ()):
        name = raw_name.lower()
        if name == b"authorization":
            bearer = _bearer_token(value.decode("latin-1"))
        elif name == b"x-api-key":
            api_key = value.decode("latin-1").strip()
        elif name in _FORWARDING_HEADERS:
            forwarded = True
        elif name == b"host":
            host = value
        elif name == b"origin":
            origin = value
        elif name == b"sec-fetch-site":
            fetch_site = value
        elif name == b"content-type":
            content_type = value
    client = scope.get("client")
    server = scope.get("server")
    sender = Sender(  # the server's own address stands in for a missing Host, as in Django's request
        host=host.decode("latin-1") if host is not None else (str(server[0]) if server else ""),
        method=scope.get("method", "GET"),
        origin=origin.decode("latin-1") if origin is not None else None,
        fetch_site=fetch_site.decode("latin-1") if fetch_site is not None else None,
        content_type=content_type.decode("latin-1") if content_type is not None else None,
    )
    return authenticate(bearer or api_key, peer=client[0] if client else None, forwarded=forwarded, table=table,
                        sender=sender, path=_path_info(scope))


def caller_of(request: HttpRequest, table: RoutingTable) -> Caller:
    """The caller the handler authenticated before reading the body, or authenticated now from the request."""
    caller = getattr(request, CALLER_ATTRIBUTE, None)
    if isinstance(caller, Caller):
        return caller
    meta = request.META
    token = _bearer_token(meta.get("HTTP_AUTHORIZATION", "")) or meta.get("HTTP_X_API_KEY", "").strip()
    forwarded = any(name in meta for name in _FORWARDING_META)
    sender = Sender(host=meta.get("HTTP_HOST") or meta.get("SERVER_NAME", ""), method=request.method or "GET",
                    origin=meta.get("HTTP_ORIGIN"), fetch_site=meta.get("HTTP_SEC_FETCH_SITE"),
                    content_type=meta.get("CONTENT_TYPE") or None)
    return authenticate(token, peer=meta.get("REMOTE_ADDR"), forwarded=forwarded, table=table, sender=sender,
                        path=request.path_info)


def authenticate(token: str, *, peer: str | None, forwarded: bool, table: RoutingTable,
                 sender: Sender | None = None, path: str = "") -> Caller:
    """The caller presenting ``token`` (may be empty) from TCP peer ``peer``; raises a 401 ``GatewayError``, or
    in open mode a 403 or 415 when ``sender`` (None: nothing known, refused) is not a local program.

    A playground token (routing.api.playground_token) is checked as such and never falls back to open mode:
    a refused one is a 401 wherever it comes from, so the playground never sends what it did not mean to."""
    if is_token(token):
        try:
            return Caller(key_of_token(token, table=table, path=path))
        except TokenRefusal as exc:
            raise _unauthorized(exc.message) from None
    key, refusal = _valid_key(token, table)
    if key is not None:
        return Caller(key)
    if cached_settings.GOMODEL_AUTH == "open" and not forwarded and is_loopback(peer):
        problem = local_program_refusal(sender) if sender is not None else _not_local("the request's Host is unknown")
        if problem is not None:
            raise problem
        return OPEN_CALLER  # whatever it sent: the SDKs insist on sending some key, and the demo says "unused"
    raise _unauthorized(refusal)


def _path_info(scope: dict[str, Any]) -> str:
    """The request's path below the application's mount point (as Django's ``path_info``)."""
    path: str = scope.get("path", "")
    root: str = scope.get("root_path", "")
    return path[len(root):] if root and path.startswith(root) else path


def local_program_refusal(sender: Sender) -> GatewayError | None:
    """Why a keyless request in open mode looks sent by a web page rather than a local program, or None.

    403 when its Host is neither a loopback name nor in ALLOWED_HOSTS (DNS rebinding), when its Origin is
    another host, or when Sec-Fetch-Site says another origin sent it; 415 when it has a body that is not
    declared JSON (what a page can send to another origin without a CORS preflight).
    """
    if not is_local_host(sender.host):
        return _not_local(f"Host {sender.host[:100]!r} is neither a loopback name (localhost, 127.0.0.1, [::1]) "
                          "nor in DJANGO_ALLOWED_HOSTS; call it as http://127.0.0.1:<port>/v1")
    if sender.origin is not None and not _same_host(sender.origin, sender.host):
        return _not_local(f"a web page on another site sent it (Origin {sender.origin[:100]!r}); a local program "
                          "sends no Origin header, or the gateway's own")
    if sender.fetch_site is not None and sender.fetch_site.strip().lower() in _OTHER_ORIGIN_SITES:
        return _not_local(f"a web page on another origin sent it (Sec-Fetch-Site: {sender.fetch_site[:20]}); a "
                          "local program sends no Sec-Fetch-Site header")
    if sender.method.upper() not in _BODYLESS_METHODS and not is_json_type(sender.content_type):
        got = "no Content-Type" if sender.content_type is None else f"Content-Type {sender.content_type[:100]!r}"
        return GatewayError(415, f"Unsupported media type: {OPEN_MODE}, which send their body as JSON; send "
                            f"Content-Type: application/json (this request has {got}), or send a gateway key "
                            f"({SEND_IT}).", code="unsupported_media_type", error_class="permanent")
    return None


class _LocalHostVerdicts:
    """``is_local_host``'s verdicts by Host header, for the ALLOWED_HOSTS they were reached with.

    A keyless request checks its Host on every call, and a client sends the same Host each time; the check is
    a dozen Python calls. The table is bounded and a full one keeps what it has, so Hosts a client invents
    cost the check, never memory. It starts afresh when ALLOWED_HOSTS is another object (a setting changed).
    """

    LIMIT = 64

    def __init__(self) -> None:
        self.allowed: object = None
        self.verdicts: dict[str, bool] = {}

    def verdict(self, host: str) -> bool:
        allowed = cached_settings.ALLOWED_HOSTS
        if allowed is not self.allowed:
            self.allowed, self.verdicts = allowed, {}
        found = self.verdicts.get(host)
        if found is None:
            found = _is_local_host(host, allowed)
            if len(self.verdicts) < self.LIMIT:
                self.verdicts[host] = found
        return found


_LOCAL_HOSTS = _LocalHostVerdicts()


def is_local_host(host: str) -> bool:
    """Whether a Host header names this machine by a loopback name, or is one of the operator's ALLOWED_HOSTS."""
    return _LOCAL_HOSTS.verdict(host)


def _is_local_host(host: str, allowed_hosts: list[str]) -> bool:
    domain, _port = split_domain_port(host.strip().lower())
    if not domain:
        return False
    if domain == "localhost" or is_loopback(domain[1:-1] if domain.startswith("[") else domain):
        return True
    return validate_host(domain, allowed_hosts)


def is_json_type(content_type: str | None) -> bool:
    """Whether a Content-Type is ``application/json``, with or without parameters (``; charset=utf-8``)."""
    return content_type is not None and content_type.split(";", 1)[0].strip().lower() == "application/json"


def _same_host(origin: str, host: str) -> bool:
    """Whether an Origin (``http://localhost:8000``) names the host and port of the request's Host header.

    A missing port is the scheme's default on both sides; ``null`` (a sandboxed page, a file) is never the same.
    """
    try:
        parsed = urlsplit(origin.strip().lower())
        origin_port = parsed.port
    except ValueError:
        return False
    default = _DEFAULT_PORTS.get(parsed.scheme)
    if default is None or not parsed.hostname:
        return False
    origin_host = f"[{parsed.hostname}]" if ":" in parsed.hostname else parsed.hostname
    domain, port = split_domain_port(host.strip().lower())
    return (origin_host, str(origin_port) if origin_port is not None else default) == (domain, port or default)


def _not_local(reason: str) -> GatewayError:
    return GatewayError(403, f"Refused: {OPEN_MODE}, and {reason}. To call it from anywhere else, or from a web "
                        f"page, create a gateway key ({HOW_TO_CREATE}) and {SEND_IT}.",
                        code="not_a_local_program", error_class="permanent")


def _valid_key(token: str, table: RoutingTable) -> tuple[KeySpec | None, str]:
    """The table's live key for ``token``, or None and the reason to give the client."""
    key = table.keys_by_hash.get(hash_secret(token)) if token else None
    if key is not None and not key.revoked:
        if key.expires_at is not None and key.expires_at <= time.time():
            return None, "This gateway key has expired."
        return key, ""
    return None, _refusal(sent=bool(token), open_mode=cached_settings.GOMODEL_AUTH == "open",
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

