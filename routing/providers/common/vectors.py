"""The check every embeddings answer's vectors pass, whatever the provider's format."""

from __future__ import annotations

import math
from typing import Any

from routing.providers.errors import MalformedResponse

_NUMBERS = frozenset({int, float})  # JSON numbers; ``type() in``, not isinstance: a bool is not a number here


def finite_vector(value: Any, where: str) -> list[float]:
    """The vector as it came, once every entry is a finite number (this runs over every float of the answer);
    MalformedResponse naming ``where`` otherwise.

    The sum is finite exactly when every entry is (an infinity or a NaN carries through; unit-length
    vectors cannot overflow), which costs one C loop instead of a check per entry.
    """
    if type(value) is not list or not value or not all(type(x) in _NUMBERS for x in value) \
            or not math.isfinite(sum(value)):
        raise MalformedResponse(f"{where} is not a list of finite numbers")
    return value
