"""The Redis URL forms the gateway's Redis client supports, read into a ``RedisAddress``.

``redis://[[user]:password@]host[:port][/db]``, ``rediss://...`` (TLS, the system trust store) and
``unix:///path/to/socket[?db=N]``. One server only: Redis Cluster and Sentinel are not supported. A URL
option the client does not implement (redis-py's ``?ssl_cert_reqs=``, ``?socket_timeout=``, ...) is refused
by name rather than silently ignored, so a URL copied from another client cannot half-apply.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import parse_qs, unquote, urlsplit

_SCHEMES = ("redis", "rediss", "unix")
_OPTIONS = frozenset({"db"})
_NOT_SUPPORTED = "the gateway talks to one Redis server; Redis Cluster and Sentinel are not supported"


@dataclass(frozen=True, slots=True)
class RedisAddress:
    """Where the client connects and how it sets the connection up."""

    scheme: str  # redis, rediss or unix
    host: str = "127.0.0.1"
    port: int = 6379
    path: str = ""  # unix sockets only
    db: int = 0
    username: str | None = None
    password: str | None = None

    def __repr__(self) -> str:
        where = self.path if self.scheme == "unix" else f"{self.host}:{self.port}"
        return f"RedisAddress({self.scheme}://{where}/{self.db})"  # never the password


def parse_redis_url(url: str) -> RedisAddress:
    """The address a Redis URL names; ``ValueError`` saying what is wrong (never echoing a password)."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in _SCHEMES:
        raise ValueError(f"must start with redis://, rediss:// or unix://, not {scheme}:// ({_NOT_SUPPORTED})")
    if "," in parts.netloc:
        raise ValueError(f"names several hosts ({_NOT_SUPPORTED})")
    try:
        query = parse_qs(parts.query, keep_blank_values=True, strict_parsing=bool(parts.query))
    except ValueError:
        raise ValueError("has a malformed query string") from None
    unknown = sorted(set(query) - _OPTIONS)
    if unknown:
        raise ValueError(f"option {', '.join(unknown)} is not supported (the only option is db)")
    username = unquote(parts.username) if parts.username else None
    password = unquote(parts.password) if parts.password else None
    db_text = query.get("db", ["0"])[-1]
    if scheme == "unix":
        if not parts.path:
            raise ValueError("unix:// needs the socket's path, e.g. unix:///run/redis/redis.sock?db=0")
        return RedisAddress(scheme, path=parts.path, db=_database(db_text), username=username, password=password)
    try:
        port = parts.port or 6379
    except ValueError:
        raise ValueError("has an invalid port") from None
    path = (parts.path or "/").lstrip("/")
    return RedisAddress(scheme, host=parts.hostname or "127.0.0.1", port=port, db=_database(path or db_text),
                        username=username, password=password)


def _database(text: str) -> int:
    if not text.isdigit():
        raise ValueError(f"names the database {text!r}; a database is a number, e.g. /0")
    return int(text)
