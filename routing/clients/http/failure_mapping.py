"""aiohttp's exceptions as the gateway's ``TransportFailure`` kinds (see ``routing/clients/upstream.py``)::

    ClientError
    ├── ClientConnectorError (DNS, refused, TLS, the proxy)  -> connect            nothing reached the provider
    │   ├── ClientConnectorCertificateError                  -> connect            "TLS certificate not trusted"
    │   └── ClientProxyConnectionError                       -> connect            the proxy itself is unreachable
    ├── ClientHttpProxyError (CONNECT refused)               -> connect            naming the proxy and its answer
    ├── ConnectionTimeoutError                               -> connect_timeout
    ├── ServerDisconnectedError, ClientOSError (before the head)
    │                                                        -> connection_lost    the provider may have acted
    ├── ClientPayloadError (the body cut short)              -> connection_lost
    │                      (the body itself malformed)       -> protocol
    └── ClientResponseError (an invalid or oversized head)   -> protocol

A message names the origin (and the proxy) by host and port only, never a credential.
"""

from __future__ import annotations

import ssl

import aiohttp

from routing.clients.http.failures import TransportFailure

MAX_HEADER_LINES = 100
MAX_FIELD_BYTES = 64 * 1024  # one header line (aiohttp's parser bounds each line and the number of them)
MAX_LINE_BYTES = 8 * 1024  # the status line


def exchange_failure(exc: aiohttp.ClientError, where: str, proxy: str | None) -> TransportFailure:
    """What went wrong before the response head was in."""
    if isinstance(exc, aiohttp.ClientConnectorCertificateError):
        error = exc.certificate_error
        reason = getattr(error, "verify_message", None) or str(error)
        return TransportFailure("connect", f"could not connect to {where} (TLS certificate not trusted: {reason})")
    if isinstance(exc, aiohttp.ClientConnectorSSLError):
        error = exc.os_error
        reason = (error.reason if isinstance(error, ssl.SSLError) else None) or error.__class__.__name__
        return TransportFailure("connect", f"could not connect to {where} (TLS failed: {reason})")
    if isinstance(exc, aiohttp.ClientProxyConnectionError):
        return TransportFailure("connect", f"could not connect to the proxy {proxy} ({_os_reason(exc.os_error)})")
    if isinstance(exc, aiohttp.ClientConnectorError):
        return TransportFailure("connect", f"could not connect to {where} ({_os_reason(exc.os_error)})")
    if isinstance(exc, aiohttp.ClientHttpProxyError):
        return TransportFailure("connect", f"the proxy {proxy} refused a tunnel to {where.split(' ')[0]} "
                                           f"({exc.status} {exc.message})")
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return TransportFailure("connect_timeout", f"no connection to {where} in time")
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return TransportFailure("connection_lost", "the provider closed the connection without answering")
    if isinstance(exc, aiohttp.ClientOSError):
        return TransportFailure("connection_lost", f"the connection was reset before the provider answered ({exc})")
    if isinstance(exc, aiohttp.ClientResponseError):
        return head_failure(exc.message)
    if isinstance(exc, aiohttp.ClientPayloadError):
        return body_failure(exc)
    if isinstance(exc, aiohttp.InvalidURL | aiohttp.NonHttpUrlClientError):
        return TransportFailure("connect", "the provider URL cannot be used")
    return TransportFailure("protocol", f"the exchange with {where} failed ({exc.__class__.__name__})")


def head_failure(message: str) -> TransportFailure:
    lowered = message.lower()
    if "too many headers" in lowered:
        return TransportFailure("protocol", f"the provider sent more than {MAX_HEADER_LINES} header lines")
    if "too long" in lowered or "got more than" in lowered or "exceeds" in lowered:
        return TransportFailure("protocol", f"the provider's response head exceeds the size limits ({message})")
    return TransportFailure("protocol", f"the provider sent an invalid HTTP response ({message})")


def body_failure(exc: aiohttp.ClientError) -> TransportFailure:
    """What went wrong while the body was read."""
    text = str(exc)
    if isinstance(exc, aiohttp.ClientPayloadError):
        if "reset mid-response" in text:
            return TransportFailure("connection_lost", text)
        if "not completed" in text:  # the connection ended before the body did
            return TransportFailure("connection_lost", "the provider closed the connection mid-response")
        return TransportFailure("protocol", f"the provider sent an invalid body ({text})")
    if isinstance(exc, aiohttp.ClientOSError | aiohttp.ServerDisconnectedError):
        return TransportFailure("connection_lost", f"the connection was lost mid-response ({text})")
    return TransportFailure("protocol", f"the provider's body could not be read ({exc.__class__.__name__})")


def _os_reason(error: OSError) -> str:
    return error.strerror or str(error) or error.__class__.__name__
