"""The generation options of an OpenAI chat body as every translator to another format reads them.

Each format names them its own way (``top_p`` is Gemini's ``topP``, Cohere's ``p``); the reads, and so the
errors a client sees for a wrong type, are the same for all.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from routing.providers.common.shape import as_int, as_list, as_str

# An OpenAI option, the format's name for it, and the typed read (shape.as_number or shape.as_int).
OptionRead = tuple[str, str, Callable[[Any, str], Any]]


def copy_options(body: Mapping[str, Any], into: dict[str, Any], options: Sequence[OptionRead]) -> None:
    """Each of ``options`` the body sets, read and put into ``into`` under the format's name, in their order."""
    for key, target, read in options:
        if body.get(key) is not None:
            into[target] = read(body[key], key)


def max_output_tokens(body: Mapping[str, Any]) -> int | None:
    """The client's limit on the answer: ``max_completion_tokens``, else the older ``max_tokens``; None if neither."""
    for key in ("max_completion_tokens", "max_tokens"):
        if body.get(key) is not None:
            return as_int(body[key], key)
    return None


def stop_sequences(body: Mapping[str, Any]) -> list[str] | None:
    """``stop`` as a list of sequences (a lone string is one); None when the client set none."""
    stop = body.get("stop")
    if isinstance(stop, str):
        return [stop]
    if stop:
        return [as_str(s, f"stop[{i}]") for i, s in enumerate(as_list(stop, "stop"))]
    return None


def asks_for_audio(body: Mapping[str, Any]) -> bool:
    """Whether the client asks for spoken output (``audio``, or ``modalities`` naming it)."""
    modalities = body.get("modalities")
    return body.get("audio") is not None or (isinstance(modalities, list) and "audio" in modalities)
