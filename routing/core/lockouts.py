"""LockoutSuspicions: a 401/403/404 one gateway key saw, kept for that key alone until it is confirmed.

A provider's 401, 403 or 404 (``auth``, ``not_found``, ``quota``) usually means the target is broken for every
request: our key was revoked, the model was renamed. But a request can earn one too (a ``previous_response_id``
the provider does not know, a file or a fine-tune of another account), and a hostile tenant could send such a
request on purpose to lock a model out for everyone. So a live attempt's lockout is only a *suspicion*:

- the key (``Call.key_scope``) that saw it avoids the target until ``ttl_s`` passes (its next requests fall back
  instead of meeting the same answer again), nobody else does;
- it becomes a lockout for every key, in this process and (through the shared health) every other, once it is
  confirmed: by an immediate probe with the gateway's own credentials (``routing.gateway.background.prober``), or by a
  second key seeing the same while the first key's suspicion holds;
- a probe that passes dismisses it: the target works with the gateway's credentials, so the request caused its
  own answer. For ``probe_spacing_s`` afterwards a new suspicion of that target is dismissed at once (and no
  second probe is sent), so a client cannot make the gateway probe for every request it sends.

Failures for which nothing reached the provider (no usable key, TLS that cannot work) are the gateway's own
verdict and need no confirmation. Bounded (least recently used, entries expire); time is a parameter.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from typing import Literal

from routing.core.cooldown import failure_kind
from routing.core.outcome import AttemptOutcome

KeyScope = int | str  # a gateway key's id, or "open" when the gateway runs without keys
Report = Literal["confirmed", "suspected", "dismissed"]

# Lockout reasons decided before anything is sent: the gateway's own verdict, which no request can cause.
DECIDED_BEFORE_SENDING = frozenset({"key_unavailable", "tls_error"})


def needs_confirmation(outcome: AttemptOutcome) -> bool:
    """Whether a live attempt's failure is a lockout that must be confirmed before it applies to every key."""
    return failure_kind(outcome) == "lockout" and outcome.reason not in DECIDED_BEFORE_SENDING


class LockoutSuspicions:
    """(target, key) -> until when that key avoids the target; and when each target was last probed for it.

    Not thread-safe: one event loop owns it, like the health registry.
    """

    __slots__ = ("ttl_s", "probe_spacing_s", "_max_entries", "_avoid", "_by_target", "_probed", "_proven")

    def __init__(self, *, ttl_s: float = 300.0, probe_spacing_s: float = 10.0, max_entries: int = 10_000) -> None:
        if ttl_s <= 0 or probe_spacing_s < 0 or max_entries < 1:
            raise ValueError("LockoutSuspicions needs ttl_s > 0, probe_spacing_s >= 0 and max_entries >= 1")
        self.ttl_s = ttl_s
        self.probe_spacing_s = probe_spacing_s
        self._max_entries = max_entries
        self._avoid: OrderedDict[tuple[str, KeyScope], float] = OrderedDict()
        self._by_target: dict[str, set[KeyScope]] = {}
        # Per target: when a confirmation probe was last sent, and when one last passed. At most one entry per
        # configured target (``retain`` drops the others), so these stay small without an LRU of their own.
        self._probed: dict[str, float] = {}
        self._proven: dict[str, float] = {}

    def avoids(self, target: str, key: KeyScope, now: float) -> float | None:
        """Until when ``key`` avoids ``target`` (None: it does not). The request path's check: a dict lookup."""
        if not self._avoid:
            return None
        until = self._avoid.get((target, key))
        if until is None:
            return None
        if now >= until:
            self._drop(target, key)
            return None
        return until

    def report(self, target: str, key: KeyScope, now: float) -> Report:
        """A live attempt of ``key`` met a lockout at ``target``: what it comes to.

        ``dismissed``: a probe with the gateway's credentials passed within ``probe_spacing_s``, so the request
        caused its own answer; ``confirmed``: another key's suspicion of the target holds, so the target is locked
        out for every key now (the suspicions are dropped: the breaker holds it from here); ``suspected``: only
        ``key`` avoids the target, until ``now + ttl_s``.
        """
        proven = self._proven.get(target)
        if proven is not None and now - proven < self.probe_spacing_s:
            return "dismissed"
        others = [k for k in list(self._by_target.get(target, ())) if k != key and self.avoids(target, k, now)]
        if others:
            self.clear(target)
            return "confirmed"
        entry = (target, key)
        self._avoid[entry] = now + self.ttl_s
        self._avoid.move_to_end(entry)
        self._by_target.setdefault(target, set()).add(key)
        while len(self._avoid) > self._max_entries:
            (old_target, old_key), _ = self._avoid.popitem(last=False)
            self._unindex(old_target, old_key)
        return "suspected"

    def wants_probe(self, target: str, now: float) -> bool:
        """Whether to send a confirmation probe of ``target`` now; True also books it (one per spacing)."""
        last = self._probed.get(target)
        if last is not None and now - last < self.probe_spacing_s:
            return False
        self._probed[target] = now
        return True

    def dismiss(self, target: str, now: float) -> None:
        """A probe with the gateway's own credentials passed: no key avoids ``target`` any more."""
        self.clear(target)
        self._proven[target] = now

    def clear(self, target: str) -> None:
        """Forget every key's suspicion of ``target`` (confirmed: the breaker holds it now; or dismissed)."""
        for key in list(self._by_target.get(target, ())):
            self._drop(target, key)

    def retain(self, targets: Iterable[str]) -> None:
        """Forget targets that are no longer configured (after a routing table swap)."""
        keep = set(targets)
        for target in [t for t in self._by_target if t not in keep]:
            self.clear(target)
        for book in (self._probed, self._proven):
            for target in [t for t in book if t not in keep]:
                del book[target]

    def reset(self) -> None:
        self._avoid.clear()
        self._by_target.clear()
        self._probed.clear()
        self._proven.clear()

    def __len__(self) -> int:
        return len(self._avoid)

    def _drop(self, target: str, key: KeyScope) -> None:
        self._avoid.pop((target, key), None)
        self._unindex(target, key)

    def _unindex(self, target: str, key: KeyScope) -> None:
        keys = self._by_target.get(target)
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self._by_target[target]
