"""A loopback stand-in for Google's OAuth token endpoint, and a service-account key file that points at it.

The key is a freshly generated RSA key; the server checks each JWT-bearer grant's RS256 signature against its
public half and its claims (issuer, audience, scope) as Google would, then answers ``{"access_token",
"expires_in", "token_type"}`` with the next token of a numbered series (or the error it is told to give). Every
grant is recorded with its arrival time, so a test can see when a refresh happened.
"""

from __future__ import annotations

import base64
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

CLOUD_PLATFORM = "https://www.googleapis.com/auth/cloud-platform"
CLIENT_EMAIL = "gateway@test-project-1.iam.gserviceaccount.com"
GOOGLE_TOKEN_URI = "https://oauth2.googleapis.com/token"


def _b64decode(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


@dataclass
class Grant:
    at: float  # time.time() when it arrived
    claims: dict[str, Any]
    token: str | None  # what was answered (None: an error)


@dataclass
class TokenServer:
    """Start with ``with TokenServer() as server``; ``write_key_file(dir)`` makes the credentials file."""

    expires_in: int = 3600
    prefix: str = "ya29.test-token-"
    fixed: str | None = None  # answer this token every time instead of a numbered series
    fail_with: tuple[int, dict[str, Any]] | None = None  # (status, body) answered instead of a token
    grants: list[Grant] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.private_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                form = parse_qs(self.rfile.read(length).decode())
                status, body = server.answer(form)
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.token_uri = f"http://127.0.0.1:{self.http.server_address[1]}/token"

    def __enter__(self) -> TokenServer:
        threading.Thread(target=self.http.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.http.shutdown()
        self.http.server_close()

    @property
    def private_key_pem(self) -> str:
        return self.private_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                              serialization.NoEncryption()).decode()

    def write_key_file(self, directory: Path) -> Path:
        path = directory / "service-account.json"
        path.write_text(json.dumps({
            "type": "service_account", "project_id": "test-project-1", "private_key_id": "0123456789abcdef",
            "private_key": self.private_key_pem, "client_email": CLIENT_EMAIL, "client_id": "1234567890",
            "token_uri": self.token_uri,
        }))
        return path

    def tokens(self) -> list[str]:
        with self._lock:
            return [g.token for g in self.grants if g.token is not None]

    def answer(self, form: dict[str, list[str]]) -> tuple[int, dict[str, Any]]:
        claims = self._verified_claims(form)
        with self._lock:
            if claims is None:
                self.grants.append(Grant(time.time(), {}, None))
                return 400, {"error": "invalid_grant", "error_description": "Invalid JWT Signature."}
            if self.fail_with is not None:
                self.grants.append(Grant(time.time(), claims, None))
                return self.fail_with
            token = self.fixed or f"{self.prefix}{len([g for g in self.grants if g.token]) + 1}"
            self.grants.append(Grant(time.time(), claims, token))
            return 200, {"access_token": token, "expires_in": self.expires_in, "token_type": "Bearer"}

    def _verified_claims(self, form: dict[str, list[str]]) -> dict[str, Any] | None:
        """The grant's claims when it is a JWT-bearer grant signed by our key for our endpoint, else None."""
        if form.get("grant_type") != ["urn:ietf:params:oauth:grant-type:jwt-bearer"]:
            return None
        try:
            header, payload, signature = form["assertion"][0].split(".")
            self.private_key.public_key().verify(_b64decode(signature), f"{header}.{payload}".encode(),
                                                 padding.PKCS1v15(), hashes.SHA256())
        except (KeyError, ValueError, InvalidSignature):
            return None
        claims: dict[str, Any] = json.loads(_b64decode(payload))
        # google-auth names Google's token endpoint as the audience whatever the file's token_uri.
        if claims.get("iss") != CLIENT_EMAIL or claims.get("aud") not in (self.token_uri, GOOGLE_TOKEN_URI):
            return None
        return claims
