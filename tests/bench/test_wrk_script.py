"""The load generator's script for a fixed body: wrk sends that body and the extra headers a reference needs."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from harness.wrk import fixed_body_script, run_wrk


class _Recorder(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as wrk expects
    seen: list[tuple[dict[str, str], bytes]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        if len(self.seen) < 5:
            self.seen.append((dict(self.headers.items()), body))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def recorder() -> Iterator[str]:
    _Recorder.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1/chat/completions"
    finally:
        server.shutdown()
        server.server_close()


def test_it_posts_the_body_with_the_extra_headers(recorder: str) -> None:
    body = json.dumps({"model": "instant", "messages": [{"role": "user", "content": "]]=] [[ quotes \" here"}]})
    headers = {"x-portkey-provider": "openai", "x-portkey-custom-host": "http://127.0.0.1:18001/v1",
               "Authorization": "Bearer sk-bench"}

    result = run_wrk(recorder, fixed_body_script(body, headers), connections=1, seconds=1)

    assert result.requests > 0
    assert result.errors == {}
    sent_headers, sent_body = _Recorder.seen[0]
    assert sent_body.decode() == body
    assert sent_headers["Content-Type"] == "application/json"
    for name, value in headers.items():
        assert sent_headers[name] == value
