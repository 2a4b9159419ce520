"""The provider HTTP client: aiohttp, with the gateway's limits, failure kinds and connection slots around it.
See ``routing/clients/upstream.py`` for how the gateway uses it."""

from routing.clients.http.client import Client
from routing.clients.http.failures import PoolExhausted, TransportFailure
from routing.clients.http.response import UpstreamResponse

__all__ = ["Client", "PoolExhausted", "TransportFailure", "UpstreamResponse"]
