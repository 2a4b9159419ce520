"""Spans to an OTLP/HTTP receiver from one background thread, behind a bounded queue the request path never waits on.

``submit`` is what a request pays: a length check and a ``deque.extend`` (both atomic under the GIL, so no lock).
A full queue drops the request's spans whole - a trace is never cut in half - and says so through ``on_dropped``,
which the gateway counts in ``gomodel_otel_spans_dropped_total``. The thread wakes every schedule delay, or as soon
as a batch is full, encodes the batch (protobuf, optionally gzip) and posts it; a 429, 502, 503, 504 or no answer is
retried twice with a growing wait, any other refusal drops the batch. A receiver that is slow or down therefore
fills the queue and costs dropped spans, never a slower request.

The post goes the way provider traffic goes (``HTTPS_PROXY`` / ``HTTP_PROXY`` / ``NO_PROXY``, loopback direct, the
system trust store). Log lines name only the receiver's origin: the URL's path and the headers may hold a token.
"""

from __future__ import annotations

import collections
import gzip
import logging
import ssl
import threading
import time
from collections.abc import Callable, Sequence

import httpx2

from routing.clients.egress import egress
from routing.core.otlp_proto import SpanData

log = logging.getLogger("gomodel.tracing")

USER_AGENT = "gomodel-otlp/1"
RETRYABLE = frozenset({429, 502, 503, 504})
RETRIES = 2
RETRY_WAIT_S = 1.0  # before the first retry; doubled before the second
MAX_RETRY_AFTER_S = 5.0  # a receiver's Retry-After is honoured up to this
WARN_EVERY_S = 60.0


class SpanExporter:
    """The queue and the thread that empties it; ``start`` once, ``submit`` per request, ``shutdown`` at the stop."""

    def __init__(self, *, url: str, origin: str, headers: Sequence[tuple[str, str]], compression: str,
                 timeout_s: float, max_queue_spans: int, max_batch_spans: int, schedule_delay_s: float,
                 encode: Callable[[list[SpanData]], bytes], on_exported: Callable[[int], None],
                 on_dropped: Callable[[str, int], None]) -> None:
        self.url = url
        self.origin = origin
        self._headers = {"Content-Type": "application/x-protobuf", "User-Agent": USER_AGENT, **dict(headers)}
        if compression == "gzip":
            self._headers["Content-Encoding"] = "gzip"
        self._gzip = compression == "gzip"
        self._timeout_s = timeout_s
        self._max_queue = max_queue_spans
        self._max_batch = max_batch_spans
        self._delay_s = schedule_delay_s
        self._encode = encode
        self._on_exported = on_exported
        self._on_dropped = on_dropped
        self._queue: collections.deque[SpanData] = collections.deque()
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_warning = -WARN_EVERY_S

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="gomodel-otlp-exporter", daemon=True)
            self._thread.start()

    @property
    def queued(self) -> int:
        return len(self._queue)

    def submit(self, spans: list[SpanData]) -> None:
        """Queue one request's spans, or drop them all when they do not fit; never blocks."""
        queue = self._queue
        if len(queue) + len(spans) > self._max_queue or self._stopping.is_set():
            self._on_dropped("queue_full" if not self._stopping.is_set() else "shutdown", len(spans))
            return
        queue.extend(spans)
        if len(queue) >= self._max_batch and not self._wake.is_set():
            self._wake.set()

    def shutdown(self, timeout_s: float) -> bool:
        """Send what is queued (no retries) within ``timeout_s``; True when nothing was left behind."""
        self._stopping.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
        if self._thread is not None and self._thread.is_alive():
            return False
        left = len(self._queue)
        if left:
            self._queue.clear()
            self._on_dropped("shutdown", left)
        return left == 0

    def _run(self) -> None:
        client = httpx2.Client(verify=ssl.create_default_context(), trust_env=False, proxy=self._proxy(),
                               follow_redirects=False, timeout=self._timeout_s)
        try:
            while True:
                self._wake.wait(self._delay_s)
                self._wake.clear()
                stopping = self._stopping.is_set()
                while self._queue:
                    self._export(client, self._take(), retry=not stopping)
                    if not stopping and len(self._queue) < self._max_batch:
                        break  # a partial batch waits for the next tick, so batches stay large under load
                if stopping:
                    return
        except Exception:  # a bug here must not pass silently, nor take the process down
            log.exception("the trace exporter stopped; spans are dropped from now on")
            self._stopping.set()
        finally:
            client.close()

    def _take(self) -> list[SpanData]:
        queue, batch = self._queue, list[SpanData]()
        while queue and len(batch) < self._max_batch:
            batch.append(queue.popleft())
        return batch

    def _export(self, client: httpx2.Client, batch: list[SpanData], *, retry: bool) -> None:
        body = self._encode(batch)
        if self._gzip:
            body = gzip.compress(body, compresslevel=5)
        wait_s, problem = RETRY_WAIT_S, ""
        for attempt in range(RETRIES + 1 if retry else 1):
            if attempt:
                if self._stopping.wait(wait_s):  # stopping: no more retries, the rest of the queue goes next
                    break
                wait_s *= 2
            try:
                answer = client.post(self.url, content=body, headers=self._headers)
            except (httpx2.HTTPError, OSError, ValueError) as exc:
                problem = f"{type(exc).__name__}"
                continue
            if 200 <= answer.status_code < 300:
                self._on_exported(len(batch))
                return
            problem = f"answered {answer.status_code}"
            if answer.status_code not in RETRYABLE:
                self._on_dropped("rejected", len(batch))
                self._warn(f"the OTLP receiver at {self.origin} {problem}; {len(batch)} spans dropped")
                return
            wait_s = max(wait_s, min(_retry_after(answer.headers.get("retry-after")), MAX_RETRY_AFTER_S))
        self._on_dropped("export_failed", len(batch))
        self._warn(f"could not export traces to {self.origin} ({problem or 'stopping'}); {len(batch)} spans dropped")

    def _warn(self, message: str) -> None:
        now = time.monotonic()
        if now - self._last_warning >= WARN_EVERY_S:  # at most one line a minute: an outage must not flood the log
            self._last_warning = now
            log.warning("%s (gomodel_otel_spans_dropped_total counts every one)", message)

    def _proxy(self) -> httpx2.Proxy | None:
        target = httpx2.URL(self.url)
        port = target.port or (443 if target.scheme == "https" else 80)
        proxy = egress.environment().proxy_for(target.scheme, target.host, port)
        if proxy is None:
            return None
        headers = {"Proxy-Authorization": proxy.authorization} if proxy.authorization else None
        return httpx2.Proxy(f"http://{proxy.address}", headers=headers)


def _retry_after(value: str | None) -> float:
    try:
        return max(0.0, float(value)) if value else 0.0
    except ValueError:
        return 0.0
