"""The types of an ASGI application and of the callables it is handed, as the handlers here use them.

A message is a dict whose values depend on its ``type`` (bytes, ints, lists of header pairs): arbitrary here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

Scope = dict[str, Any]
Message = Mapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
