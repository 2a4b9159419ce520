"""The cluster's one background prober: a lease in Redis that one gateway process holds at a time.

``<prefix>probe-lease`` holds the holder's name and expires after ``ttl``; the holder renews it on every wake-up,
and a process whose lease lapsed (it died, it lost Redis) is replaced by the first other process that asks after
the expiry. Acquiring and renewing are one script, so two processes can never both believe they hold it;
``release`` deletes the key only when it is still the caller's, so a stopping process hands over at once.
"""

from __future__ import annotations

from routing.clients.redis_client import RespClient, Script

# ARGV: the holder's name, the lease in ms. 1 when the caller holds the lease (taken or renewed), else 0.
_HOLD = Script("""
local holder = redis.call('GET', KEYS[1])
if holder == false then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', tonumber(ARGV[2]))
  return 1
end
if holder == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]))
  return 1
end
return 0
""")
_RELEASE = Script("""
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
""")


class ProbeLease:
    """One process's claim on the cluster's prober. Raises the Redis client's errors; the caller decides."""

    def __init__(self, url: str, holder: str, *, prefix: str, timeout: float = 0.5) -> None:
        self._client = RespClient(url, timeout=timeout)
        self.key = f"{prefix}probe-lease"
        self.holder = holder

    async def hold(self, ttl_s: float) -> bool:
        """Take the lease, or renew it when already ours, for ``ttl_s``; True when this process holds it."""
        reply = await self._client.run_script(_HOLD, [self.key], [self.holder, max(1, round(ttl_s * 1000))])
        return int(reply) == 1

    async def holder_now(self) -> str | None:
        """Who holds the lease now (for the admin and tests); None when nobody does."""
        value = await self._client.execute("GET", self.key)
        return None if value is None else str(value)

    async def release(self) -> None:
        """Give the lease up when it is still ours (a stopping process), so another takes over at once."""
        await self._client.run_script(_RELEASE, [self.key], [self.holder])

    async def aclose(self) -> None:
        await self._client.aclose()
