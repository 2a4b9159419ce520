"""An operator's webhook receiver for the tests: a real HTTP server on loopback that records every POST and answers
the statuses it is given in turn (200 once they run out)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Receiver:
    url: str
    statuses: list[int] = field(default_factory=list)  # answered in turn, then 200
    posts: list[Received] = field(default_factory=list)
    arrived: threading.Condition = field(default_factory=threading.Condition)

    def wait_for(self, count: int, timeout: float = 30.0) -> list[Received]:
        """The posts once ``count`` have arrived (the test fails with what came when they do not)."""
        with self.arrived:
            self.arrived.wait_for(lambda: len(self.posts) >= count, timeout)
            return list(self.posts)

    def wait_until(self, done: Callable[[list[Received]], bool], timeout: float = 30.0) -> list[Received]:
        """The posts once ``done`` holds of them (or what came by ``timeout``, for the test to fail on)."""
        with self.arrived:
            self.arrived.wait_for(lambda: done(self.posts), timeout)
            return list(self.posts)


@contextmanager
def webhook_receiver(statuses: list[int] | None = None, path: str = "/hooks/gomodel") -> Iterator[Receiver]:
    receiver: Receiver

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            status = receiver.statuses.pop(0) if receiver.statuses else 200
            self.send_response(status)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")
            with receiver.arrived:
                receiver.posts.append(Received(self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                receiver.arrived.notify_all()

        def log_message(self, format: str, *args: object) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    receiver = Receiver(f"http://127.0.0.1:{server.server_address[1]}{path}", list(statuses or []))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
