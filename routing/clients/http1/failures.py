"""What the provider client raises::

    TransportFailure        the exchange with the provider failed below HTTP; ``kind`` says where:
                            connect, connect_timeout, write_timeout, read_timeout, connection_lost, protocol
    PoolExhausted           no connection slot freed up in time: the gateway's own overload, nothing was sent
"""

from __future__ import annotations


class TransportFailure(Exception):
    """The exchange failed below HTTP. ``kind`` is one of: ``connect``, ``connect_timeout``,
    ``write_timeout``, ``read_timeout``, ``connection_lost``, ``protocol``."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class PoolExhausted(Exception):
    """Every connection slot the request could use stayed busy for the whole wait.

    Not a ``TransportFailure``: no provider was asked anything, so it must not count against one (no
    cooldown, no retry); the gateway answers it as its own overload.
    """
