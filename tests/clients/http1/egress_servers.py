"""What a corporate egress looks like, on loopback, for the provider client's tests and the end-to-end test:

- ``PrivateCA``: a certificate authority of the test's own (the ``openssl`` command line), issuing server
  and client certificates;
- ``ConnectProxy``: an HTTP proxy answering ``CONNECT`` with a tunnel and plain requests in absolute form,
  resolving host names from its own table (so a name only the proxy knows proves the tunnel was used);
- ``TLSForwarder``: terminates TLS with a certificate and forwards the bytes to a plain HTTP server.

The proxy and the forwarder run their own event loop in a thread, so they serve a gateway process and
in-loop tests alike.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import subprocess
import threading
from collections.abc import Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Issued:
    cert: Path
    key: Path


class PrivateCA:
    """A CA made for one test run; ``issue`` signs a server or client certificate for the given names."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.cert = directory / "ca.pem"
        self.key = directory / "ca.key"
        _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                 "-keyout", str(self.key), "-out", str(self.cert), "-days", "2", "-subj", "/CN=gomodel test CA",
                 "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign")

    def issue(self, name: str, *, hosts: tuple[str, ...] = (), client: bool = False) -> Issued:
        key, csr, cert = (self.directory / f"{name}.{ext}" for ext in ("key", "csr", "pem"))
        extensions = self.directory / f"{name}.ext"
        names = ",".join(f"IP:{h}" if h.replace(".", "").isdigit() else f"DNS:{h}" for h in hosts)
        extensions.write_text(
            "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n"
            f"extendedKeyUsage={'clientAuth' if client else 'serverAuth'}\n"
            "subjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n"
            + (f"subjectAltName={names}\n" if names else ""))
        _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", str(key),
                 "-out", str(csr), "-subj", f"/CN={name}")
        _openssl("x509", "-req", "-in", str(csr), "-CA", str(self.cert), "-CAkey", str(self.key),
                 "-CAcreateserial", "-out", str(cert), "-days", "2", "-extfile", str(extensions))
        return Issued(cert, key)


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)


def server_context(issued: Issued, *, client_ca: Path | None = None,
                   alpn: list[str] | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(issued.cert, issued.key)
    if client_ca is not None:
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(cafile=str(client_ca))
    if alpn:
        context.set_alpn_protocols(alpn)
    return context


class _LoopThread:
    """An event loop running in a daemon thread, with servers started on it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._servers: list[asyncio.Server] = []
        self._writers: set[asyncio.StreamWriter] = set()

    def run(self, coroutine: Coroutine[Any, Any, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout=30)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        async def close() -> None:
            for server in self._servers:
                server.close()
            for writer in list(self._writers):
                writer.transport.abort()
            for server in self._servers:
                await server.wait_closed()
            others = asyncio.all_tasks() - {asyncio.current_task()}
            for task in others:
                task.cancel()
            await asyncio.gather(*others, return_exceptions=True)

        self.run(close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
        self.loop.close()

    def track(self, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)

    def untrack(self, writer: asyncio.StreamWriter) -> None:
        self._writers.discard(writer)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, ssl.SSLError):
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.close()


@dataclass
class ConnectProxy:
    """An HTTP proxy on 127.0.0.1; ``hosts`` maps names only it can resolve to addresses."""

    hosts: dict[str, str] = field(default_factory=dict)
    refuse_with: bytes | None = None  # a status line to answer every CONNECT with, e.g. b"403 Forbidden"
    tunnels: list[str] = field(default_factory=list)  # the authority of every CONNECT
    forwarded: list[str] = field(default_factory=list)  # the request line of every plain request
    authorizations: list[str | None] = field(default_factory=list)
    port: int = 0

    def __post_init__(self) -> None:
        self._thread = _LoopThread()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> ConnectProxy:
        self._thread.start()
        server = self._thread.run(asyncio.start_server(self._serve, "127.0.0.1", 0))
        self._thread._servers.append(server)
        self.port = server.sockets[0].getsockname()[1]
        return self

    def __exit__(self, *exc: object) -> None:
        self._thread.stop()

    def _resolve(self, authority: str) -> tuple[str, int]:
        host, _, port = authority.rpartition(":")
        return self.hosts.get(host, host), int(port)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._thread.track(writer)
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            request_line, *header_lines = head.decode("latin-1").split("\r\n")
            headers = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in header_lines if h)}
            self.authorizations.append(headers.get("proxy-authorization"))
            method, target, _ = request_line.split(" ", 2)
            if method == "CONNECT":
                self.tunnels.append(target)
                if self.refuse_with is not None:
                    writer.write(b"HTTP/1.1 " + self.refuse_with + b"\r\ncontent-length: 0\r\n\r\n")
                    await writer.drain()
                    return
                upstream_reader, upstream_writer = await asyncio.open_connection(*self._resolve(target))
                writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
                await writer.drain()
                await asyncio.gather(_pipe(reader, upstream_writer), _pipe(upstream_reader, writer))
                return
            # A plain request in absolute form: forwarded as it came (with its own connection).
            self.forwarded.append(request_line)
            authority = target.split("/")[2]
            upstream_reader, upstream_writer = await asyncio.open_connection(*self._resolve(authority))
            upstream_writer.write(head)
            await asyncio.gather(_pipe(reader, upstream_writer), _pipe(upstream_reader, writer))
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            pass
        finally:
            self._thread.untrack(writer)
            writer.close()


class TLSForwarder:
    """Terminates TLS on 127.0.0.1 with ``context`` and forwards the plain bytes to ``target`` (host, port)."""

    def __init__(self, context: ssl.SSLContext, target: tuple[str, int]) -> None:
        self.context = context
        self.target = target
        self.port = 0
        self._thread = _LoopThread()

    def __enter__(self) -> TLSForwarder:
        self._thread.start()
        server = self._thread.run(asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self.context))
        self._thread._servers.append(server)
        self.port = server.sockets[0].getsockname()[1]
        return self

    def __exit__(self, *exc: object) -> None:
        self._thread.stop()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._thread.track(writer)
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(*self.target)
            await asyncio.gather(_pipe(reader, upstream_writer), _pipe(upstream_reader, writer))
        except OSError:
            pass
        finally:
            self._thread.untrack(writer)
            writer.close()

