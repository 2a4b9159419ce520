"""Connection slots: how many exchanges may be under way at once, in all and to each origin (and route).

aiohttp's own connector limits are switched off (``limit=0``) and this takes their place, for two reasons.
A busy origin must not hold every slot while another provider's requests wait, so each origin has a share
(``max_per_origin``) below the total. And a request that cannot get a slot within its connect timeout fails
with ``PoolExhausted``, the gateway's own overload, where aiohttp's connect timeout would not tell waiting
for a slot apart from a provider that does not accept connections.

A slot is held for one exchange, from the request until its response is read or closed; it is not tied to a
socket. So idle keep-alive connections never hold a slot (aiohttp keeps them per origin and closes them after
the keep-alive expiry), and a provider whose connections sit idle cannot starve another of slots: there is no
idle connection of another origin to close to make room, as a socket-counting pool must.

Waiters are woken in arrival order, each when its own origin can proceed; one woken but cancelled (its client
hung up) before taking the slot hands the wake-up on.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any

from routing.clients.http.failures import PoolExhausted

Key = tuple[Any, ...]  # the origin and the route to it


class Slots:
    def __init__(self, *, max_total: int, max_per_origin: int) -> None:
        self.max_total = max_total
        self.max_per_origin = min(max_per_origin, max_total)
        self.in_use = 0
        self._per_origin: dict[Key, int] = {}
        self._waiters: deque[tuple[Key, asyncio.Future[None]]] = deque()

    def _free(self, key: Key) -> bool:
        return self.in_use < self.max_total and self._per_origin.get(key, 0) < self.max_per_origin

    def try_take(self, key: Key) -> bool:
        """Take a slot for ``key`` if one is free now. (A woken waiter that lost the slot this way waits again.)"""
        if not self._free(key):
            return False
        self._take(key)
        return True

    def _take(self, key: Key) -> None:
        self.in_use += 1
        self._per_origin[key] = self._per_origin.get(key, 0) + 1

    async def take(self, key: Key, by: float) -> None:
        """Wait for a slot for ``key`` until loop time ``by``; ``PoolExhausted`` when none freed up."""
        if self.try_take(key):
            return
        loop = asyncio.get_running_loop()
        while True:
            waiter: asyncio.Future[None] = loop.create_future()
            entry = (key, waiter)
            self._waiters.append(entry)
            woken = False
            try:
                async with asyncio.timeout_at(by):
                    await waiter
                woken = True
            except TimeoutError:
                raise PoolExhausted(self._exhausted_message(key)) from None
            finally:
                if not waiter.done():
                    waiter.cancel()
                if entry in self._waiters:
                    self._waiters.remove(entry)
                if not woken and waiter.done() and not waiter.cancelled():
                    self._wake()  # woken, but cancelled or timed out before taking the slot: the next waiter's
            if self._free(key):
                self._take(key)
                if self._waiters:
                    self._wake()  # another slot may be free for a waiter of another origin
                return

    def give_back(self, key: Key) -> None:
        self.in_use -= 1
        remaining = self._per_origin.get(key, 0) - 1
        if remaining > 0:
            self._per_origin[key] = remaining
        else:
            self._per_origin.pop(key, None)
        if self._waiters:
            self._wake()

    def waiting(self) -> int:
        return len(self._waiters)

    def _wake(self) -> None:
        """Wake the first waiter whose origin can proceed now."""
        for key, waiter in self._waiters:
            if not waiter.done() and self._free(key):
                waiter.set_result(None)
                return

    def _exhausted_message(self, key: Key) -> str:
        _, host, port = key[0]
        if self._per_origin.get(key, 0) >= self.max_per_origin:
            return f"all {self.max_per_origin} connections to {host}:{port} stayed busy"
        return f"all {self.max_total} upstream connections stayed busy"
