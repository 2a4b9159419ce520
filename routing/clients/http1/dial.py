"""Opening a provider connection along its route: address racing, a proxy's CONNECT tunnel, then TLS.

A host name that resolves to several addresses (IPv6 and IPv4, or several of one family) is connected the
happy-eyeballs way (RFC 8305): the families are interleaved, the next address is tried as soon as one fails
or after ``ATTEMPT_DELAY`` without an answer, and the first to connect wins (the others are closed). So an
address that drops packets costs a quarter of a second, not the connect timeout.

The socket is connected first and handed to the event loop afterwards, so a tunnel is set up on the bare
socket (``CONNECT host:port``, a 2xx answer) before TLS starts over it.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import ssl
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass

from routing.clients.http1.failures import TransportFailure
from routing.clients.http1.proxy import Proxy

ATTEMPT_DELAY = 0.25  # RFC 8305's recommended connection attempt delay
MAX_TUNNEL_HEAD = 16 * 1024

Address = tuple[int, tuple[object, ...]]  # socket family, socket address
Resolver = Callable[[str, int], Awaitable[list[Address]]]


@dataclass(frozen=True, slots=True)
class Route:
    """How a request reaches its origin: directly or through a proxy, and with which TLS context."""

    proxy: Proxy | None = None
    tls: ssl.SSLContext | None = None  # https origins; None: the pool's default context


DIRECT = Route()


async def system_resolver(host: str, port: int) -> list[Address]:
    """The host's addresses in the resolver's order; an IP address is its own (no lookup, no thread hop)."""
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
        return [(family, sockaddr) for family, _, _, _, sockaddr in infos]
    if ip.version == 6:
        return [(socket.AF_INET6, (host, port, 0, 0))]
    return [(socket.AF_INET, (host, port))]


def interleave(addresses: list[Address]) -> list[Address]:
    """Alternate address families, starting with the first answer's (RFC 8305, section 4)."""
    if not addresses:
        return []
    first = addresses[0][0]
    preferred = [a for a in addresses if a[0] == first]
    others = [a for a in addresses if a[0] != first]
    mixed: list[Address] = []
    for i in range(max(len(preferred), len(others))):
        mixed += preferred[i:i + 1] + others[i:i + 1]
    return mixed


async def connect_socket(host: str, port: int, resolver: Resolver) -> socket.socket:
    """A connected, non-blocking TCP socket to ``host:port``, addresses raced; ``OSError`` when none connects."""
    loop = asyncio.get_running_loop()
    try:
        addresses = interleave(await resolver(host, port))
    except socket.gaierror as exc:
        raise OSError(exc.errno, f"cannot resolve {host}: {exc.strerror}") from None
    if not addresses:
        raise OSError(f"{host} has no address")
    pending: set[asyncio.Task[socket.socket]] = set()
    errors: list[OSError] = []
    remaining: Iterator[Address] = iter(addresses)
    upcoming = next(remaining, None)
    try:
        while upcoming is not None or pending:
            if upcoming is not None:
                pending.add(loop.create_task(_connect_one(loop, *upcoming)))
                upcoming = next(remaining, None)
            done, pending = await asyncio.wait(
                pending, timeout=ATTEMPT_DELAY if upcoming is not None else None,
                return_when=asyncio.FIRST_COMPLETED)
            winner: socket.socket | None = None
            for task in done:
                error = task.exception()
                if error is None:
                    if winner is None:
                        winner = task.result()
                    else:
                        task.result().close()  # connected at the same moment: one is enough
                elif isinstance(error, OSError):
                    errors.append(error)
                else:
                    raise error
            if winner is not None:
                return winner
    finally:
        for task in pending:
            task.cancel()  # its own clean-up closes its socket
    raise errors[0] if len(errors) == 1 else OSError(f"no address of {host} accepted a connection ({errors[-1]})")


async def _connect_one(loop: asyncio.AbstractEventLoop, family: int, address: tuple[object, ...]) -> socket.socket:
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        await loop.sock_connect(sock, address)
    except BaseException:
        sock.close()
        raise
    return sock


async def open_tunnel(sock: socket.socket, proxy: Proxy, host_port: str) -> None:
    """Ask the proxy for a tunnel to ``host_port`` on ``sock``; ``TransportFailure`` unless it answers 2xx."""
    loop = asyncio.get_running_loop()
    lines = [f"CONNECT {host_port} HTTP/1.1\r\nhost: {host_port}\r\n"]
    if proxy.authorization:
        lines.append(f"proxy-authorization: {proxy.authorization}\r\n")
    await loop.sock_sendall(sock, ("".join(lines) + "\r\n").encode("latin-1"))
    head = b""
    while b"\r\n\r\n" not in head:
        data = await loop.sock_recv(sock, 4096)
        if not data:
            raise TransportFailure("connect", f"the proxy {proxy.address} closed the connection instead of "
                                              f"opening a tunnel to {host_port}")
        head += data
        if len(head) > MAX_TUNNEL_HEAD:
            raise TransportFailure("connect", f"the proxy {proxy.address} sent an oversized answer to CONNECT")
    status_line = head.partition(b"\r\n")[0]
    words = status_line.split(b" ", 2)
    if len(words) < 2 or not words[0].startswith(b"HTTP/1.") or not words[1].isdigit():
        raise TransportFailure("connect", f"the proxy {proxy.address} did not answer CONNECT in HTTP")
    if not 200 <= int(words[1]) < 300:
        shown = status_line.decode("latin-1", errors="replace")[:200]
        raise TransportFailure("connect", f"the proxy {proxy.address} refused a tunnel to {host_port} ({shown})")
    if len(head) > head.index(b"\r\n\r\n") + 4:
        # Bytes after the answer would have to belong to the TLS stream the origin has not started yet.
        raise TransportFailure("connect", f"the proxy {proxy.address} sent bytes after its answer to CONNECT")
