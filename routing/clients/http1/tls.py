"""TLS contexts for provider connections.

By default the system trust store, which OpenSSL reads from ``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` when they are
set; host names are checked. A provider may name its own CA bundle (trusted instead of the system store, for a
provider behind a private CA) and a client certificate and key (mutual TLS). Every context offers ALPN
``http/1.1`` only, so a server that would otherwise pick HTTP/2 answers in the protocol this client speaks.

``handshake_refusal`` tells a handshake that cannot succeed on a retry (the certificate fails verification:
self-signed, unknown CA, expired, the wrong host; the port does not speak TLS; the server refuses our
protocol versions or client certificate) from one the peer merely cut short (an end of file or a reset
mid-handshake, an overloaded load balancer), which the next connection may well get through.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass

ALPN = ["http/1.1"]

# Handshake failures that say nothing about the configuration: the peer went away or ran into trouble of its own.
_CUT_SHORT = (ssl.SSLEOFError, ssl.SSLSyscallError, ssl.SSLZeroReturnError, ssl.SSLWantReadError,
              ssl.SSLWantWriteError)
_CUT_SHORT_REASONS = frozenset({"UNEXPECTED_EOF_WHILE_READING", "TLSV1_ALERT_INTERNAL_ERROR"})
# What an operator most likely got wrong, for the refusals whose OpenSSL words do not say it.
_HINTS = {"WRONG_VERSION_NUMBER": " (the server does not speak TLS on this port: an http:// base URL?)"}


@dataclass(frozen=True, slots=True)
class TLSFiles:
    """A provider's own TLS files (PEM); empty strings for the defaults."""

    ca_bundle: str = ""
    client_cert: str = ""
    client_key: str = ""  # empty: the key is in the client certificate's file


def client_context(files: TLSFiles = TLSFiles()) -> ssl.SSLContext:
    """A client context for ``files``; ``ValueError`` naming the file that cannot be used and why."""
    if files.client_key and not files.client_cert:
        raise ValueError("client_key is set without client_cert")
    try:
        context = ssl.create_default_context(cafile=files.ca_bundle or None)
    except (OSError, ssl.SSLError) as exc:
        raise ValueError(f"ca_bundle {files.ca_bundle}: {_reason(exc)}") from None
    if files.client_cert:
        try:
            # A password callback that has none: OpenSSL would otherwise prompt on the terminal for an encrypted
            # key, which a server must never do. Such a key fails here instead.
            context.load_cert_chain(files.client_cert, files.client_key or None, password=_no_password)
        except (OSError, ssl.SSLError) as exc:
            shown = files.client_cert + (f" / client_key {files.client_key}" if files.client_key else "")
            raise ValueError(f"client_cert {shown}: {_reason(exc)}") from None
    context.set_alpn_protocols(ALPN)
    return context


def handshake_refusal(exc: BaseException) -> str | None:
    """What a TLS handshake failure that no retry can fix says (``certificate verify failed: self-signed
    certificate``, ``wrong version number ...``); None for any other failure, a handshake cut short included."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"certificate verify failed: {exc.verify_message or exc.reason or 'unknown reason'}"
    if not isinstance(exc, ssl.SSLError) or isinstance(exc, _CUT_SHORT) or not exc.reason:
        return None
    if exc.reason in _CUT_SHORT_REASONS:
        return None
    return exc.reason.lower().replace("_", " ") + _HINTS.get(exc.reason, "")


def _no_password() -> bytes:
    return b""


def _reason(exc: OSError | ssl.SSLError) -> str:
    if isinstance(exc, ssl.SSLError):
        return f"not usable PEM, or an encrypted key ({exc.reason or exc.__class__.__name__})"
    return exc.strerror or exc.__class__.__name__
