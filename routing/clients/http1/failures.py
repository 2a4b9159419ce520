"""What the provider client raises::

    TransportFailure        the exchange with the provider failed below HTTP; ``kind`` says where:
    │                       connect, connect_timeout, write_timeout, read_timeout, connection_lost, protocol
    └── kind "tls"          the TLS handshake cannot succeed on a retry: the certificate fails verification,
                            the port does not speak TLS, the provider's TLS files cannot be used
    PoolExhausted           no connection slot freed up in time: the gateway's own overload, nothing was sent
"""

from __future__ import annotations


class TransportFailure(Exception):
    """The exchange failed below HTTP. ``kind`` is one of: ``connect``, ``connect_timeout``, ``tls``,
    ``write_timeout``, ``read_timeout``, ``connection_lost``, ``protocol``.

    The message names the provider's address (for the log); ``detail`` says what went wrong without it, for
    an error a client may read (the gateway's public surfaces do not name internal hosts or files).
    """

    def __init__(self, kind: str, message: str, *, detail: str = "") -> None:
        super().__init__(message)
        self.kind = kind
        self.detail = detail or message


class PoolExhausted(Exception):
    """Every connection slot the request could use stayed busy for the whole wait.

    Not a ``TransportFailure``: no provider was asked anything, so it must not count against one (no
    cooldown, no retry); the gateway answers it as its own overload.
    """
