"""A lean HTTP/1.1 client for provider traffic: an asyncio protocol per connection, httptools' parser,
and a keep-alive pool. See ``routing/clients/upstream.py`` for how the gateway uses it."""

from routing.clients.http1.failures import PoolExhausted, TransportFailure
from routing.clients.http1.pool import Pool
from routing.clients.http1.response import UpstreamResponse

__all__ = ["Pool", "PoolExhausted", "TransportFailure", "UpstreamResponse"]
