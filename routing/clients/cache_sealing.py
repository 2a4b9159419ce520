"""Sealing cache entries that leave the process: AES-256-GCM under a key derived (HKDF-SHA256) from the Django
SECRET_KEY, the entry's own cache key as associated data.

The associated data binds an entry to its key: a sealed value copied under another key (another scope, another
request) does not open, so even someone who can write to Redis cannot make the gateway serve one caller's answer
to another. Values sealed under a key listed in ``SECRET_KEY_FALLBACKS`` still open after a rotation; a value
that opens under none is a miss.
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Sequence

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

_INFO = b"gomodel response cache v1"
_SALT = b"gomodel-response-cache"
_NONCE_BYTES = 12


def _derive(secret: str) -> AESGCM:
    key = HKDF(algorithm=hashes.SHA256(), length=32, salt=_SALT, info=_INFO).derive(secret.encode())
    return AESGCM(key)


class Sealer:
    """Seals with the first secret; opens with any of them."""

    def __init__(self, secrets: Sequence[str]) -> None:
        if not secrets or not secrets[0]:
            raise ValueError("sealing needs a secret key")
        self._ciphers = [_derive(secret) for secret in secrets if secret]

    def seal(self, value: bytes, *, key: str) -> str:
        nonce = os.urandom(_NONCE_BYTES)
        sealed = self._ciphers[0].encrypt(nonce, value, key.encode())
        return base64.b64encode(nonce + sealed).decode("ascii")

    def open(self, sealed: str, *, key: str) -> bytes | None:
        try:
            raw = base64.b64decode(sealed, validate=True)
        except (binascii.Error, ValueError):
            return None
        if len(raw) <= _NONCE_BYTES:
            return None
        nonce, body = raw[:_NONCE_BYTES], raw[_NONCE_BYTES:]
        for cipher in self._ciphers:
            try:
                return cipher.decrypt(nonce, body, key.encode())
            except InvalidTag:
                continue
        return None
