"""Short-lived credentials for the admin's playground: a signed token that stands for a gateway key, or for staff.

The playground's page calls the gateway's own ``POST /v1/chat/completions``, so a request it sends is parsed,
limited, routed and audited exactly as any client's. It never sees a key's secret (the gateway keeps only its
hash); instead the staff session asks ``/admin/playground/token/`` (a CSRF-protected POST) for a token, which is
``gmpg-`` followed by a value signed with ``DJANGO_SECRET_KEY`` (Django's ``TimestampSigner``) that names the key
by id, or ``staff`` with the user's name, and the time it was issued.

Checking one is an HMAC and a dictionary lookup, no query: the key is looked up by id in the routing table in
force, so a key revoked, expired or deleted since the token was issued is refused with it, and the request is
that key's (its model list, its team, its limits, its audit rows). A staff token is a master caller: every model,
no key limits, audited under ``playground:<user>``. A token is good for ``TOKEN_TTL_S`` seconds and only on
``/v1/chat/completions``: it cannot read a key's stored responses or ledger entries.
"""

from __future__ import annotations

import time

from django.core import signing

from routing.core.table import KeySpec, RoutingTable

TOKEN_PREFIX = "gmpg-"  # noqa: S105 - the prefix that marks a token, not a secret
TOKEN_TTL_S = 300
TOKEN_PATHS = frozenset({"/v1/chat/completions"})
STAFF = "staff"
STAFF_KEY_ID = 0  # the master key's id: a staff caller is a master caller
_SALT = "gomodel.playground"


class TokenRefusal(Exception):
    """Why a playground token does not authenticate; the message is for the client."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def mint_token(*, key_id: int | None, username: str, now: float | None = None) -> str:
    """A token for the gateway key ``key_id``, or for staff (``None``), issued to ``username`` at ``now``."""
    payload = {"k": STAFF if key_id is None else int(key_id), "u": username}
    signer = signing.TimestampSigner(salt=_SALT)
    if now is not None:
        signer.timestamp = lambda: signing.b62_encode(int(now))  # type: ignore[method-assign]
    return TOKEN_PREFIX + signer.sign_object(payload, compress=False)


def is_token(value: str) -> bool:
    return value.startswith(TOKEN_PREFIX)


def key_of_token(token: str, *, table: RoutingTable, path: str) -> KeySpec:
    """The caller a token stands for; raises ``TokenRefusal`` when it is forged, expired, used on another
    endpoint, or names a key the table no longer serves."""
    if path not in TOKEN_PATHS:
        raise TokenRefusal("A playground token is good only for POST /v1/chat/completions.")
    signer = signing.TimestampSigner(salt=_SALT)
    try:
        value = signer.unsign_object(token[len(TOKEN_PREFIX):], max_age=TOKEN_TTL_S)
    except signing.SignatureExpired:
        raise TokenRefusal("This playground token has expired: send again from the playground page.") from None
    except (signing.BadSignature, ValueError):
        raise TokenRefusal("Invalid playground token.") from None
    if not isinstance(value, dict) or not isinstance(value.get("u"), str):
        raise TokenRefusal("Invalid playground token.")
    if value.get("k") == STAFF:
        return KeySpec(id=STAFF_KEY_ID, name=f"playground:{value['u']}"[:100], secret_hash="", is_master=True)
    key_id = value.get("k")
    key = keys_by_id(table).get(key_id) if isinstance(key_id, int) else None
    if key is None or key.revoked or key.is_master:
        raise TokenRefusal("The gateway key this playground token stands for is revoked or deleted.")
    if key.expires_at is not None and key.expires_at <= time.time():
        raise TokenRefusal("The gateway key this playground token stands for has expired.")
    return key


_index: tuple[RoutingTable, dict[int, KeySpec]] | None = None


def keys_by_id(table: RoutingTable) -> dict[int, KeySpec]:
    """The table's keys by id (the master key left out), built once per table: tables are swapped, never edited."""
    global _index
    index = _index
    if index is None or index[0] is not table:
        index = (table, {k.id: k for k in table.keys_by_hash.values() if not k.is_master})
        _index = index
    return index[1]
