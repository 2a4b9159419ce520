"""Target health verdicts shared by every gateway process through Redis.

One key lives under a prefix (``gomodel:`` in production; tests pass their own):

* ``<prefix>health``, a stream of health verdicts, one entry per cooldown started, cooldown extended or
  breaker closed by a probe: fields ``o`` (the process that saw it), ``t`` (target), ``e`` (``open`` or
  ``close``), ``r`` (the reason word), ``ms`` (open: how long the cooldown lasts from the moment of the
  entry; close: how long before it the successful probe started) and ``l`` (the trip level). The stream is
  capped at about ``MAX_HEALTH_ENTRIES`` entries; verdicts are rare (a trip, not a request).

(Provider rpm/tpm lives apart: each attempt is admitted in Redis by ``routing.clients.provider_quota_store``.)

No wall clock of a gateway host is ever compared with another's: an entry carries a *remaining* duration,
its stream id is Redis's own time of writing, and every read returns Redis's ``TIME``, so a reader computes
the entry's age on one clock (Redis's) and applies the rest to its own monotonic clock.

Receiving is a poll (``poll_health``, an exclusive ``XRANGE`` after the last id seen) rather than
SUBSCRIBE: the pipelined client (``routing.clients.redis_client``) matches replies to commands in order and
has no push mode, a poll uses the same connection handling, timeouts and outage detection as every other
command, and a process that was away (a restart, a network cut) catches up from the stream instead of
losing what was published meanwhile. At one poll every 200 ms per worker the cost is a few hundred tiny
commands per second for a whole fleet.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from routing.clients.redis_client import RespClient, Script

DEFAULT_PREFIX = "gomodel:"
MAX_HEALTH_ENTRIES = 2000
POLL_BATCH = 500

_PUBLISH = """
for i = 1, #ARGV, 6 do
  redis.call('XADD', KEYS[1], 'MAXLEN', '~', tonumber(KEYS[2]), '*',
             'o', ARGV[i], 't', ARGV[i + 1], 'e', ARGV[i + 2], 'r', ARGV[i + 3], 'ms', ARGV[i + 4], 'l', ARGV[i + 5])
end
return #ARGV / 6
"""
# ARGV: the last id read ('' on the first poll), the look-back in ms for a first poll, the batch size.
_POLL = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local start = ARGV[1]
if start == '' then start = tostring(now - tonumber(ARGV[2])) else start = '(' .. start end
return {now, redis.call('XRANGE', KEYS[1], start, '+', 'COUNT', tonumber(ARGV[3]))}
"""
_PUBLISH_SCRIPT, _POLL_SCRIPT = Script(_PUBLISH), Script(_POLL)


@dataclass(frozen=True, slots=True)
class HealthEntry:
    """One health verdict as read back, with its age on Redis's clock."""

    entry_id: str
    origin: str
    target: str
    event: str  # "open" or "close"
    reason: str
    duration_ms: int  # open: remaining at writing; close: how long before writing the probe started
    level: int
    age_ms: int  # Redis's time of reading minus its time of writing


@dataclass(frozen=True, slots=True)
class OutgoingVerdict:
    origin: str
    target: str
    event: str
    reason: str
    duration_ms: int
    level: int


class SharedStateStore:
    """The Redis side of shared health. Raises the client's errors; the caller decides about outages."""

    def __init__(self, url: str, *, prefix: str = DEFAULT_PREFIX, timeout: float = 0.5) -> None:
        self._client = RespClient(url, timeout=timeout)
        self.prefix = prefix
        self._health_key = f"{prefix}health"

    async def publish(self, verdicts: Sequence[OutgoingVerdict]) -> None:
        """Append verdicts to the health stream (one round trip)."""
        if not verdicts:
            return
        args: list[str | int] = []
        for v in verdicts:
            args += [v.origin, v.target, v.event, v.reason, v.duration_ms, v.level]
        await self._client.run_script(_PUBLISH_SCRIPT, [self._health_key, str(MAX_HEALTH_ENTRIES)], args)

    async def poll_health(self, after: str | None, *, look_back_ms: int) -> tuple[list[HealthEntry], str | None]:
        """The verdicts written after the id ``after`` (on the first poll: within ``look_back_ms``), oldest
        first, and the id to poll after next time."""
        reply = await self._client.run_script(_POLL_SCRIPT, [self._health_key], [after or "", look_back_ms,
                                                                                   POLL_BATCH])
        now_ms, raw = int(reply[0]), reply[1] or []
        entries: list[HealthEntry] = []
        last = after
        for entry_id, flat in raw:
            last = entry_id
            entry = _entry(entry_id, flat, now_ms)
            if entry is not None:
                entries.append(entry)
        return entries, last

    async def aclose(self) -> None:
        await self._client.aclose()


def _entry(entry_id: str, flat: list[Any], now_ms: int) -> HealthEntry | None:
    """An entry of the health stream, or None when it is not one this version understands."""
    fields = dict(zip(flat[::2], flat[1::2], strict=True))
    try:
        written_ms = int(entry_id.split("-", 1)[0])
        return HealthEntry(entry_id=entry_id, origin=fields["o"], target=fields["t"], event=fields["e"],
                           reason=fields.get("r", ""), duration_ms=int(fields["ms"]), level=int(fields.get("l", 0)),
                           age_ms=max(0, now_ms - written_ms))
    except (KeyError, ValueError):
        return None
