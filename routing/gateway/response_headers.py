"""Setting and reading a Django response's headers with fewer calls on the request path.

``response[name] = value`` runs Django's ``_convert_to_charset`` on the name and on the value (an encode to
check the charset, the newline check, MIME encoding when the charset refuses): seven Python calls per header,
nine headers per answer. For an ASCII name and an ASCII value without a line break that conversion returns
both unchanged, so such a header is stored as Django would store it, in ``ResponseHeaders._store`` (lower-case
name -> (name, value)); any other header goes through ``response[name] = value`` for Django's exact verdict
(MIME encoding, ``BadHeaderError``).
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import chain

from django.http import HttpResponseBase


def set_headers(response: HttpResponseBase, headers: Mapping[str, str]) -> None:
    """``response[name] = value`` for every header, the same stored result."""
    store = response.headers._store
    for name, value in headers.items():
        if "\n" not in value and "\r" not in value and "\n" not in name and "\r" not in name \
                and (name + value).isascii():
            store[name.lower()] = (name, value)
        else:
            response[name] = value


def encoded_header_items(response: HttpResponseBase) -> list[tuple[bytes, bytes]]:
    """``[(name.encode("latin-1"), value.encode("latin-1")) for name, value in response.items()]``, in one encode.

    No stored name or value holds a line break (Django refuses one with ``BadHeaderError``, ``set_headers``
    stores none), so the whole head is joined on ``"\n"``, encoded once and split again: the same pairs without
    two encodes and a tuple per header in Python.
    """
    parts = "\n".join(chain.from_iterable(response.headers._store.values())).encode("latin-1").split(b"\n")
    return list(zip(parts[::2], parts[1::2], strict=True))
