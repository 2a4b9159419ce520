"""Each worker's background task that keeps target health in step with every other gateway process and host
through Redis (``REDIS_URL``; the wire side is ``routing.clients.shared_state_store``).

What is shared, and how:

* **Cooldowns, lockouts and open breakers.** A health change of this process (a cooldown started, one
  extended by a Retry-After or a lockout, a breaker closed by a probe) reaches ``TargetHealth.listener``,
  which only appends it to an outbox and wakes the task: the request that caused it never waits for Redis.
  The task writes it as a remaining duration, and every other process reads it within one poll
  (``interval_s``, 200 ms) and adopts it. Adoption never shortens a cooldown (the later end wins), and a
  close is applied only where the breaker's own cooldown is already over and the probe started after the
  latest failure this process holds (``TargetHealth.adopt_close``).
* **Background probes** (``routing.gateway.background.prober``, one process of the cluster). A probe that ends a
  cooldown early is written as a ``close`` with the reason ``background_probe``; the other processes close too, even
  while their own cooldown runs, unless a 429 holds it there or a newer failure arrived (``TargetHealth.
  adopt_probe_close``). Each probe's result is written as a ``probe`` entry, so every process's admin page shows
  the last probe of a target whichever process sent it.
* **Not shared:** latency estimates, attempts in flight, probe slots: each process measures its own.
  (Provider rpm/tpm is not kept in step here: each attempt is admitted in Redis itself,
  ``routing.clients.provider_quota_store``.)

Redis away: nothing on the request path changes (it never called Redis for these). The round fails, the
outage is logged once (and counted in ``gomodel_shared_state_outages_total``), own verdicts wait in the
outbox (bounded) and are written when Redis answers, if still in force. The next round that works logs the
recovery and catches up from the stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import socket
import time
from collections import deque
from collections.abc import Callable

from routing.clients.redis_client import RedisReplyError, RedisUnavailable
from routing.clients.shared_state_store import (
    POLL_BATCH,
    HealthEntry,
    OutgoingVerdict,
    SharedStateStore,
)
from routing.core.health import BreakerClosed, CooldownStarted, HealthChange, HealthRegistry
from routing.core.probes import LastProbe, ProbeReported
from routing.ops import metrics

log = logging.getLogger("gomodel.shared")

_UNAVAILABLE = (RedisUnavailable, RedisReplyError, OSError)
INTERVAL_S = 0.2
MAX_OUTBOX = 1000
LOOK_BACK_SLACK_S = 5.0  # a new process also reads verdicts this much older than the longest cooldown
BACKGROUND_PROBE = "background_probe"  # the reason of a close by a background probe (it may shorten a cooldown)


def process_origin() -> str:
    """This process as other replicas see it: host, pid and a random tag (a restarted pid is another process)."""
    return f"{socket.gethostname()[:40]}/{os.getpid()}/{secrets.token_hex(3)}"


class SharedSync:
    """Keeps one process's health registry in step with the shared store."""

    def __init__(
        self,
        store: SharedStateStore,
        health: HealthRegistry,
        *,
        known: Callable[[str], bool],
        interval_s: float = INTERVAL_S,
        origin: str | None = None,
        clock: Callable[[], float] = time.monotonic,
        probes: dict[str, LastProbe] | None = None,
    ) -> None:
        self.store = store
        self.health = health
        self.origin = origin or process_origin()
        self.interval_s = interval_s
        self._known = known
        self._clock = clock
        self._outbox: deque[HealthChange | ProbeReported] = deque(maxlen=MAX_OUTBOX)
        self.probes = probes if probes is not None else {}  # the last probe of each target, from any process
        self._after: str | None = None  # the last stream id read
        self.redis_up: bool | None = None  # None until the first round
        self._task: asyncio.Task[None] | None = None
        self._wake: asyncio.Event | None = None
        health.listen(self._on_change)

    # -- lifecycle -----------------------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def start(self) -> None:
        """Start the background task on the running event loop (idempotent)."""
        if self.running:
            return
        self._wake = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._run(), name="gomodel-shared-sync")

    async def stop(self) -> None:
        """Stop the task, write what the outbox still holds (one try), and close the connection."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._outbox and self.redis_up is not False:
            with contextlib.suppress(*_UNAVAILABLE):
                await self._publish()
        self.health.listen(None)
        await self.store.aclose()

    async def _run(self) -> None:
        wake = self._wake
        if wake is None:
            raise RuntimeError("start() creates the wake-up event")
        while True:
            try:
                await self.sync_once()
            except asyncio.CancelledError:
                raise
            except Exception:  # the task must outlive a bug in one round; log.exception says so loudly
                log.exception("shared health and limits: a sync round failed unexpectedly")
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.interval_s):
                    await wake.wait()
            wake.clear()

    # -- one round -----------------------------------------------------------------------------------------

    async def sync_once(self) -> bool:
        """Write own verdicts and read the others'; False during an outage."""
        try:
            await self._publish()
            await self._receive()
        except _UNAVAILABLE as exc:
            self._mark_down(exc)
            return False
        self._mark_up()
        return True

    def _on_change(self, change: HealthChange | ProbeReported) -> None:
        """The listener of every target's health: hand the change on, never wait (runs on the request path)."""
        self._outbox.append(change)
        if self._wake is not None:
            self._wake.set()

    def report_probe(self, report: ProbeReported) -> None:
        """Tell the other processes a background probe's result (for their admin pages)."""
        self._on_change(report)

    async def _publish(self) -> None:
        if not self._outbox:
            return
        now = self._clock()
        changes = list(self._outbox)
        verdicts = [v for v in (self._verdict(c, now) for c in changes) if v is not None]
        await self.store.publish(verdicts)
        written = set(map(id, changes))
        # Only what was written leaves the outbox; changes added meanwhile stay (a full outbox may already have
        # dropped some of the written ones from its front).
        while self._outbox and id(self._outbox[0]) in written:
            self._outbox.popleft()
        for verdict in verdicts:
            metrics.SHARED_HEALTH_PUBLISHED.labels(verdict.event).inc()

    def _verdict(self, change: HealthChange | ProbeReported, now: float) -> OutgoingVerdict | None:
        if isinstance(change, CooldownStarted):
            remaining_ms = round((change.until - now) * 1000)
            if remaining_ms <= 0:  # over while it waited (an outage): nothing left to share
                return None
            return OutgoingVerdict(self.origin, change.target, "open", change.reason, remaining_ms, change.level)
        if isinstance(change, BreakerClosed):
            return OutgoingVerdict(self.origin, change.target, "close",
                                   BACKGROUND_PROBE if change.early else "probe_succeeded",
                                   max(0, round((now - change.probe_started) * 1000)), 0)
        if isinstance(change, ProbeReported):
            return OutgoingVerdict(self.origin, change.target, "probe", f"{change.result}:{change.effect}", 0, 0)
        return None

    async def _receive(self) -> None:
        look_back_ms = round((self.health.config.cooldown_max_s + LOOK_BACK_SLACK_S) * 1000)
        while True:
            entries, self._after = await self.store.poll_health(self._after, look_back_ms=look_back_ms)
            now = self._clock()
            for entry in entries:
                if entry.origin != self.origin and self._known(entry.target):
                    self.apply(entry, now)
            if len(entries) < POLL_BATCH:
                return

    def apply(self, entry: HealthEntry, now: float) -> bool:
        """Apply another process's verdict to this process's health; True when it changed anything."""
        if entry.event == "probe":
            result, _, effect = entry.reason.partition(":")
            self.probes[entry.target] = LastProbe(time.time() - entry.age_ms / 1000, result, effect, entry.origin)
            return False
        health = self.health.get(entry.target)
        if entry.event == "open":
            until = now + (entry.duration_ms - entry.age_ms) / 1000
            adopted = health.adopt_cooldown(until, now, reason=entry.reason, origin=entry.origin)
        elif entry.event == "close" and entry.reason == BACKGROUND_PROBE:
            adopted = health.adopt_probe_close(now - (entry.age_ms + entry.duration_ms) / 1000, now)
        elif entry.event == "close":
            adopted = health.adopt_close(now - (entry.age_ms + entry.duration_ms) / 1000, now)
        else:
            return False
        if adopted:
            metrics.SHARED_HEALTH_ADOPTED.labels(entry.event).inc()
        return adopted

    # -- outages -------------------------------------------------------------------------------------------

    def _mark_down(self, exc: BaseException) -> None:
        if self.redis_up is not False:
            log.warning(
                "SHARED HEALTH AND PROVIDER LIMITS: Redis unreachable (%s: %s); cooldowns, lockouts and limit "
                "counts are kept per process until it answers again", type(exc).__name__, exc,
            )
            metrics.SHARED_STATE_OUTAGES.inc()
            metrics.SHARED_STATE_UP.set(0)
        self.redis_up = False

    def _mark_up(self) -> None:
        if self.redis_up is False:
            log.warning("shared health and provider limits: Redis reachable again; state is shared again")
        if self.redis_up is not True:
            metrics.SHARED_STATE_UP.set(1)
        self.redis_up = True
