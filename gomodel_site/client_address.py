"""The address of the client behind an admin or auditor-page request, for counting failed logins.

The TCP peer (``REMOTE_ADDR``, from the ASGI scope's ``client``) unless ``GOMODEL_TRUSTED_PROXIES`` says how
many reverse proxies in front of the gateway append to ``X-Forwarded-For``. Then the client is the entry the
outermost of them wrote: each proxy appends the address it received the request from, so with N proxies it
is the N-th entry from the right. Entries further left were written by whoever sent the request and prove
nothing; believing them would let an attacker pick the address its failures are counted against.

Only the login throttle uses this. ``/v1``'s open mode never looks at a forwarded header
(routing/api/gateway_auth.py).
"""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest


def client_address(request: HttpRequest) -> str | None:
    """The client's address as the trusted proxies reported it, or the TCP peer."""
    peer: str | None = request.META.get("REMOTE_ADDR") or None
    proxies: int = settings.GOMODEL_TRUSTED_PROXIES
    if proxies == 0:
        return peer
    header: str = request.META.get("HTTP_X_FORWARDED_FOR", "")
    forwarded = [part.strip() for part in header.split(",") if part.strip()]
    if len(forwarded) < proxies:
        return peer  # not the chain the proxies build: count the failure against the nearest one we know
    return forwarded[-proxies]
