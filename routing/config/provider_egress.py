"""Checks of a provider's egress settings (``proxy``, ``ca_bundle``, ``client_cert``, ``client_key``), shared by
the admin's form and the config file, so both refuse the same values with the same words.

The TLS files are loaded as the gateway will load them: a path that does not exist, a file that is not PEM,
or an encrypted key is refused when it is saved, not found out on the first request. A proxy URL may not
carry credentials: the configuration is versioned, dumped and shown in the admin, so a proxy that needs a
password belongs in ``HTTPS_PROXY`` / ``HTTP_PROXY`` in the environment.
"""

from __future__ import annotations

from pathlib import PurePath
from urllib.parse import urlsplit

from routing.clients.egress import check_proxy_setting
from routing.clients.http1.tls import TLSFiles, client_context

TLS_FIELDS = ("ca_bundle", "client_cert", "client_key")
EGRESS_FIELDS = ("proxy", *TLS_FIELDS)


def egress_problems(*, proxy: str, ca_bundle: str, client_cert: str, client_key: str) -> dict[str, str]:
    """Field name -> what is wrong with it; empty when the settings can be used."""
    problems: dict[str, str] = {}
    if proxy:
        try:
            check_proxy_setting(proxy)
        except ValueError as exc:
            problems["proxy"] = f"{exc}; expected empty (the environment's proxy), direct, or http://host:port"
        else:
            if urlsplit(proxy if "://" in proxy else f"http://{proxy}").username is not None:
                problems["proxy"] = ("a proxy with credentials belongs in HTTPS_PROXY / HTTP_PROXY in the "
                                     "environment, not in the configuration")
    paths = {"ca_bundle": ca_bundle, "client_cert": client_cert, "client_key": client_key}
    for name, path in paths.items():
        if path and not PurePath(path).is_absolute():
            problems[name] = "expected an absolute path to a PEM file"
    if client_key and not client_cert:
        problems["client_key"] = "a client key needs its client_cert"
    if not any(name in problems for name in TLS_FIELDS) and any(paths.values()):
        try:
            client_context(TLSFiles(ca_bundle, client_cert, client_key))
        except ValueError as exc:
            field = str(exc).split(" ", 1)[0]
            problems[field if field in TLS_FIELDS else "ca_bundle"] = str(exc)
    return problems
