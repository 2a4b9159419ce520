"""A budget's spend as the audit trail recorded it: what seeds the limit store's spend for a budget period.

The limit store asks once per budget period and process (without Redis), or when a Redis spend key is missing
(evicted, or Redis restarted empty), so that neither a restart nor an eviction forgets what a key or team has
spent. The read runs in a database thread, off the event loop; it is never on the path of a request whose
spend is already counted.
"""

from __future__ import annotations

import datetime as dt

from django.apps import apps

from routing.clients.db_thread import in_db_thread
from routing.clients.limit_store import SpendSource
from routing.core.limits import NANOS_PER_USD, LimitScope

# Asked of Django's app registry (as routing.gateway.audit_handoff does): without the audit app there is no
# trail to seed from.
AUDITED = apps.is_installed("audit")
if AUDITED:
    from audit.selectors import billed_since


def _billed_nanos(scope: LimitScope, since_unix: float) -> int:
    since = dt.datetime.fromtimestamp(since_unix, tz=dt.UTC)
    if scope.kind == "key":
        usd = billed_since(since=since, key_id=int(scope.ident.split(":", 1)[1]))
    else:
        usd = billed_since(since=since, team=scope.name)
    return round(usd * NANOS_PER_USD)


_billed_nanos_in_thread = in_db_thread(_billed_nanos)


async def spend_since(scope: LimitScope, since_unix: float) -> int:
    """The nano-dollars the scope spent since ``since_unix`` (the start of its budget period)."""
    return await _billed_nanos_in_thread(scope, since_unix)


def spend_source() -> SpendSource | None:
    """The audit trail's sums, or None when the audit app is not installed (nothing to seed from)."""
    return spend_since if AUDITED else None
