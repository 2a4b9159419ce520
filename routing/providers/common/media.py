"""Data URLs and media types: the one place that knows how inline files are spelled."""

from __future__ import annotations

import mimetypes
from dataclasses import dataclass
from urllib.parse import urlsplit

from routing.providers.errors import RequestShapeError

ANTHROPIC_IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})


@dataclass(frozen=True, slots=True)
class InlineData:
    """Base64 bytes with their media type, as a data URL carries them."""

    media_type: str
    data: str


def parse_data_url(url: str, param: str) -> InlineData | None:
    """The inline data of a ``data:`` URL, or None for any other URL (http, https, gs, ...).

    Only base64 data URLs are accepted: every provider format wants base64.
    """
    if not url.startswith("data:"):
        return None
    header, comma, payload = url.partition(",")
    params = header[5:].split(";")
    if not comma or "base64" not in params[1:]:
        raise RequestShapeError("a data URL must be base64: data:<media type>;base64,<data>", param)
    media_type = (params[0] or "text/plain").strip().lower()
    return InlineData(media_type, payload)


def data_url(media_type: str, data: str) -> str:
    return f"data:{media_type};base64,{data}"


def guess_media_type(url_or_name: str, default: str) -> str:
    """The media type suggested by a URL's or file name's extension, else ``default``."""
    path = urlsplit(url_or_name).path if "://" in url_or_name else url_or_name
    guessed, _ = mimetypes.guess_type(path, strict=False)
    return guessed or default


AUDIO_MEDIA_TYPES = {"wav": "audio/wav", "mp3": "audio/mp3"}
