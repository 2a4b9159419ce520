"""The thought signatures Gemini 3 issues with its function calls, and the check it makes of them.

Gemini 3 sends a ``thoughtSignature`` on the first ``functionCall`` part of every answer that calls a function,
and refuses a request whose current turn (every content after the last user content that holds text rather than
only function responses) has a model step whose first function call lacks it: a 400 ``INVALID_ARGUMENT`` naming
the function and the content's 1-based position. A signature it did not issue is refused as corrupted; the
documented sentinel ``skip_thought_signature_validator`` passes, as it does at Google. Earlier turns are not
checked, as Gemini does not check them.

Signatures are sealed over the function's name (routing/simulator/wire/signing.py), so every simulator process
accepts what any other issued, and one moved to another function is refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from routing.simulator.wire.base import RequestError
from routing.simulator.wire.signing import seal, sealed

SKIP_SIGNATURE = "skip_thought_signature_validator"
_KEY = b"gomodel-simulator-gemini-thought-v1"
_MARK = b"SIMG"
_MISSING = (
    "Function call is missing a thought_signature in functionCall parts. This is required for tools to work "
    "correctly, and missing thought_signature may lead to degraded model performance. Additional data, function "
    "call `default_api:{name}` , position {position}. Please refer to "
    "https://ai.google.dev/gemini-api/docs/thought-signatures for more details."
)
_CORRUPTED = "Corrupted thought signature."


def sign_function_call(token: str, name: str) -> str:
    """The signature of a call of ``name`` issued for the request ``token`` (24 hex characters), standard base64."""
    return seal(_KEY, _MARK, token, name.encode("utf-8"))


def _parts(content: Any) -> list[Mapping[str, Any]]:
    parts = content.get("parts") if isinstance(content, Mapping) else None
    return [part for part in parts if isinstance(part, Mapping)] if isinstance(parts, list) else []


def _call_of(part: Mapping[str, Any]) -> Mapping[str, Any] | None:
    call = part.get("functionCall", part.get("function_call"))
    return call if isinstance(call, Mapping) else None


def _current_turn_start(contents: list[Any]) -> int:
    """The index after the last user content with text: where Gemini's current turn begins."""
    for index in range(len(contents) - 1, -1, -1):
        content = contents[index]
        if not isinstance(content, Mapping) or content.get("role", "user") != "user":
            continue
        if any("text" in part for part in _parts(content)):
            return index + 1
    return 0


def check_thought_signatures(contents: list[Any]) -> None:
    """Refuse, as Gemini 3 does, a current turn whose model steps call functions without their signatures."""
    for index in range(_current_turn_start(contents), len(contents)):
        content = contents[index]
        if not isinstance(content, Mapping) or content.get("role") != "model":
            continue
        first = next((part for part in _parts(content) if _call_of(part) is not None), None)
        if first is None:
            continue
        name = str((_call_of(first) or {}).get("name", ""))
        signature = first.get("thoughtSignature", first.get("thought_signature"))
        if not isinstance(signature, str) or not signature:
            raise RequestError(_MISSING.format(name=name, position=index + 1), "contents")
        if signature != SKIP_SIGNATURE and not sealed(_KEY, _MARK, signature, name.encode("utf-8")):
            raise RequestError(_CORRUPTED, "contents")
