"""One post of a budget alert to an operator's webhook: signed, through the deployment's egress, never raising.

The body is signed with ``GOMODEL_BUDGET_ALERT_SECRET`` (``routing.core.budget_alerts.signature_header``: a fresh
timestamp on every attempt, so a receiver refuses replays). The post takes the route provider traffic takes from the
environment: ``HTTPS_PROXY`` / ``HTTP_PROXY`` / ``NO_PROXY`` as the gateway's settings read them (loopback is
never proxied), and the system trust store (``SSL_CERT_FILE`` / ``SSL_CERT_DIR``) with host names checked. Redirects
are not followed (a receiver that moved is a failed delivery the operator sees), and the answer's body is never
read, so a receiver can neither redirect the alert elsewhere nor make the sender read without end.

Retries are the caller's (the Celery task, or the in-process sender): this module makes one attempt and says how
it went. Nothing here logs or returns the URL's path or query, which may carry the receiver's token.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass

import httpx2

from routing.clients.egress import egress
from routing.core.budget_alerts import ALERT_ID_HEADER, SIGNATURE_HEADER, signature_header

USER_AGENT = "gomodel-budget-alerts/1"
_MAX_ERROR = 300
_CONTEXT: list[ssl.SSLContext] = []  # made once: loading the trust store costs milliseconds


@dataclass(frozen=True, slots=True)
class PostResult:
    """How one attempt went: the receiver's status (None when there was no answer) and, unless it was a 2xx, why."""

    status: int | None
    error: str = ""

    @property
    def delivered(self) -> bool:
        return self.status is not None and 200 <= self.status < 300


def _tls() -> ssl.SSLContext:
    if not _CONTEXT:
        _CONTEXT.append(ssl.create_default_context())
    return _CONTEXT[0]


def _proxy(url: str) -> httpx2.Proxy | None:
    target = httpx2.URL(url)
    port = target.port or (443 if target.scheme == "https" else 80)
    proxy = egress.environment().proxy_for(target.scheme, target.host, port)
    if proxy is None:
        return None
    headers = {"Proxy-Authorization": proxy.authorization} if proxy.authorization else None
    return httpx2.Proxy(f"http://{proxy.address}", headers=headers)


def _origin(url: str) -> str:
    """``scheme://host[:port]`` of ``url``: all of it an error message shows."""
    try:
        target = httpx2.URL(url)
    except (httpx2.InvalidURL, ValueError):
        return "the webhook"
    host = f"[{target.host}]" if ":" in target.host else target.host
    return f"{target.scheme}://{host}" + (f":{target.port}" if target.port else "")


def post_alert(url: str, body: bytes, *, secret: str, alert_id: str, now: float, timeout_s: float) -> PostResult:
    """POST ``body`` (JSON) to ``url`` signed with ``secret`` at ``now``; the outcome, never an exception."""
    origin = _origin(url)
    headers = {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        SIGNATURE_HEADER: signature_header(secret, int(now), body),
        ALERT_ID_HEADER: alert_id,
    }
    try:
        with (httpx2.Client(verify=_tls(), trust_env=False, proxy=_proxy(url), follow_redirects=False,
                            timeout=timeout_s) as client,
              client.stream("POST", url, content=body, headers=headers) as answer):
            status = answer.status_code
    except (httpx2.HTTPError, OSError, ValueError) as exc:
        return PostResult(None, _shown(f"{type(exc).__name__}: {exc}", url, origin))
    if 200 <= status < 300:
        return PostResult(status)
    return PostResult(status, f"{origin} answered {status}")


def _shown(text: str, url: str, origin: str) -> str:
    """An error message with the URL cut to its origin, bounded."""
    return text.replace(url, origin)[:_MAX_ERROR]
