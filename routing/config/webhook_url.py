"""What a budget alert webhook URL may be: an ``http(s)://host[:port]/path`` without credentials in it.

Checked where a URL is written (the ``teams:`` section, the admin's team form, ``GOMODEL_BUDGET_ALERT_WEBHOOK_URL``)
so that a bad one is refused naming its field, not found at the first alert. The URL is configuration (versioned,
dumped, shown in the admin), so a user or password in it is refused: a receiver authenticates the gateway by the
body's signature. Only the origin (``webhook_origin``) is ever logged or recorded, since a path may carry a token.
"""

from __future__ import annotations

from urllib.parse import urlsplit

MAX_URL_LENGTH = 2000


def webhook_url_problem(url: str) -> str | None:
    """Why ``url`` cannot receive budget alerts, or None when it can (an empty URL is "none configured")."""
    if not url:
        return None
    if len(url) > MAX_URL_LENGTH:
        return f"must be at most {MAX_URL_LENGTH} characters"
    if any(ch.isspace() for ch in url):
        return "must not contain white space"
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return "is not a valid URL (a bad port or address)"
    if parts.scheme not in ("http", "https"):
        return f"must be an http:// or https:// URL, got {parts.scheme + '://' if parts.scheme else 'no scheme'}"
    if not parts.hostname:
        return "names no host"
    if parts.username is not None or parts.password is not None:
        return "must not carry a user or password (receivers check the body's signature instead)"
    if port == 0:
        return "has port 0"
    return None


def webhook_origin(url: str) -> str:
    """``scheme://host[:port]`` of a checked URL: what logs and the audit trail show of it."""
    parts = urlsplit(url)
    host = f"[{parts.hostname}]" if parts.hostname and ":" in parts.hostname else parts.hostname or ""
    return f"{parts.scheme}://{host}" + (f":{parts.port}" if parts.port else "")
