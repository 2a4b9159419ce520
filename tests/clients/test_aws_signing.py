"""SigV4 for Bedrock: a request captured on the wire carries a signature that an independent computation (the
SigV4 algorithm written out here with hmac and hashlib) reproduces from the test credentials; an API key is a
bearer token with no signature; the credential chain is read from the environment in a thread, refreshed in the
background before expiry, and a provider with no credentials fails as a configuration error without a secret in
any message or repr."""

from __future__ import annotations

import asyncio
import datetime
import hashlib
import hmac
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import quote, urlsplit

import pytest
from botocore.credentials import RefreshableCredentials

from routing.clients import aws_credentials, aws_signing, upstream
from routing.clients.aws_credentials import AwsCredentialCache, AwsCredentials, CredentialsUnavailable
from routing.core.table import ModelSpec, ProviderSpec, Secret
from routing.core.validate import ValidationRules
from routing.gateway.attempt import AttemptSpec, run_json_attempt
from tests.gateway.support import run

ACCESS_KEY, SECRET_KEY, TOKEN = "AKIDTESTEXAMPLE00001", "test-secret-key/abc+def", "test-session-token"
MODEL = ModelSpec(name="br/haiku", provider="br", upstream="anthropic.claude-3-haiku-20240307-v1:0")
ANSWER = {"output": {"message": {"role": "assistant", "content": [{"text": "hi"}]}}, "stopReason": "end_turn",
          "usage": {"inputTokens": 3, "outputTokens": 1, "totalTokens": 4}}


class Capture(ThreadingHTTPServer):
    """A loopback Bedrock stand-in that keeps each request exactly as it arrived."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.requests: list[dict[str, Any]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["content-length"]))
        assert isinstance(self.server, Capture)
        self.server.requests.append({"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()},
                                     "body": body})
        data = json.dumps(ANSWER).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        return


@pytest.fixture
def capture() -> Iterator[Capture]:
    server = Capture()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture(autouse=True)
def fresh_cache() -> Iterator[None]:
    aws_credentials.credential_cache.forget()
    yield
    aws_credentials.credential_cache.forget()


def bedrock(url: str, *, keys: tuple[str, ...] = (), aws_keys: tuple[str, ...] = ()) -> ProviderSpec:
    return ProviderSpec(name="br", kind="bedrock", base_url=url, region="eu-west-3",
                        api_keys=tuple(Secret(k) for k in keys), aws_keys=tuple(Secret(k) for k in aws_keys))


def attempt(provider: ProviderSpec, api_key: str = "") -> AttemptSpec:
    return AttemptSpec(provider=provider, model=MODEL, body={"model": "br/haiku", "messages": [
        {"role": "user", "content": "Grüße"}]}, inbound="openai", stream=False, api_key=api_key, timeout_s=5.0,
        rules=ValidationRules(), client_wants_usage=False)


def expected_signature(request: dict[str, Any], *, secret: str, region: str) -> tuple[str, str]:
    """(signed header names, signature) recomputed from the captured request with the SigV4 algorithm."""
    authorization = request["headers"]["authorization"]
    fields = dict(part.strip().split("=", 1) for part in authorization.removeprefix("AWS4-HMAC-SHA256 ").split(","))
    signed = fields["SignedHeaders"].split(";")
    amz_date = request["headers"]["x-amz-date"]
    day = amz_date[:8]
    path = urlsplit(request["path"]).path
    canonical = "\n".join([
        "POST",
        quote(path, safe="/~"),  # each segment encoded once more, as SigV4 asks of every service but S3
        "",
        "".join(f"{name}:{' '.join(request['headers'][name].split())}\n" for name in signed),
        ";".join(signed),
        hashlib.sha256(request["body"]).hexdigest(),
    ])
    scope = f"{day}/{region}/bedrock/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    key = f"AWS4{secret}".encode()
    for part in (day, region, "bedrock", "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return fields["SignedHeaders"], hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()


def test_a_static_key_pair_signs_the_exact_bytes_sent(capture: Capture) -> None:
    result = run(run_json_attempt(attempt(bedrock(capture.url, aws_keys=(ACCESS_KEY, SECRET_KEY, TOKEN)))))

    assert result.outcome.ok
    [request] = capture.requests
    assert request["path"] == "/model/anthropic.claude-3-haiku-20240307-v1%3A0/converse"
    headers = request["headers"]
    assert headers["x-amz-security-token"] == TOKEN
    assert headers["authorization"].startswith(f"AWS4-HMAC-SHA256 Credential={ACCESS_KEY}/"
                                               f"{headers['x-amz-date'][:8]}/eu-west-3/bedrock/aws4_request, ")
    signed, signature = expected_signature(request, secret=SECRET_KEY, region="eu-west-3")
    assert set(signed.split(";")) >= {"host", "x-amz-date", "x-amz-security-token", "content-type"}
    assert headers["authorization"].endswith(f"Signature={signature}")
    assert json.loads(request["body"])["messages"][0]["content"] == [{"text": "Grüße"}]


def test_an_api_key_is_sent_as_a_bearer_token_without_a_signature(capture: Capture) -> None:
    provider = bedrock(capture.url, keys=("bedrock-api-key-1",), aws_keys=(ACCESS_KEY, SECRET_KEY))
    result = run(run_json_attempt(attempt(provider, api_key="bedrock-api-key-1")))

    assert result.outcome.ok
    [request] = capture.requests
    assert request["headers"]["authorization"] == "Bearer bedrock-api-key-1"
    assert "x-amz-date" not in request["headers"]


def test_the_default_chain_reads_the_environment_in_a_worker_thread(capture: Capture,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_PROFILE", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    threads: list[str] = []
    chain = aws_credentials.resolve_default_chain

    def observed() -> Any:
        threads.append(threading.current_thread().name)
        return chain()

    monkeypatch.setattr(aws_credentials.credential_cache, "_resolve", observed)

    async def two_requests() -> None:
        loop_thread = threading.current_thread().name
        for _ in range(2):
            assert (await run_json_attempt(attempt(bedrock(capture.url)))).outcome.ok
        assert threads
        assert loop_thread not in threads

    run(two_requests())
    assert len(threads) == 1  # the second request read the cache
    for request in capture.requests:
        signed, signature = expected_signature(request, secret=SECRET_KEY, region="eu-west-3")
        assert request["headers"]["authorization"].endswith(f"Signature={signature}")
        assert "x-amz-security-token" not in request["headers"]


def test_expiring_credentials_are_refreshed_in_the_background_off_the_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    # Credentials that expire in 3 s; botocore refreshes within 2 s of expiry, the cache asks 1.5 s before it.
    monkeypatch.setattr(aws_credentials, "REFRESH_MARGIN_S", 1.5)
    monkeypatch.setattr(aws_credentials, "MIN_VALIDITY_S", 0.0)
    refreshed_on: list[str] = []
    generation = [0]

    def metadata() -> dict[str, str]:
        generation[0] += 1
        expiry = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=3 if generation[0] == 1 else 3600)
        return {"access_key": f"AKIDGEN{generation[0]:013d}", "secret_key": "s", "token": "t",
                "expiry_time": expiry.isoformat()}

    def refresh() -> dict[str, str]:
        refreshed_on.append(threading.current_thread().name)
        return metadata()

    source = RefreshableCredentials.create_from_metadata(metadata(), refresh, "test")
    source._advisory_refresh_timeout, source._mandatory_refresh_timeout = 2, 1
    cache = AwsCredentialCache(resolve=lambda: source)

    async def scenario() -> tuple[str, str]:
        loop_thread = threading.current_thread().name
        first = await cache.get(bedrock("http://127.0.0.1:1"))
        deadline = asyncio.get_running_loop().time() + 10
        while not refreshed_on and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.1)
        second = await cache.get(bedrock("http://127.0.0.1:1"))
        assert loop_thread not in refreshed_on
        cache.forget()
        return first.access_key, second.access_key

    first, second = asyncio.run(scenario())
    assert refreshed_on, "the refresh did not run"
    assert (first, second) == ("AKIDGEN0000000000001", "AKIDGEN0000000000002")


def test_no_credentials_is_a_configuration_error_remembered_and_never_a_crash(monkeypatch: pytest.MonkeyPatch,
                                                                              capture: Capture) -> None:
    calls = [0]

    def nothing() -> None:
        calls[0] += 1
        return None

    monkeypatch.setattr(aws_credentials.credential_cache, "_resolve", nothing)
    for _ in range(2):
        with pytest.raises(CredentialsUnavailable, match="no AWS credentials"):
            run(run_json_attempt(attempt(bedrock(capture.url))))
    assert calls[0] == 1  # the verdict is remembered for a while
    assert capture.requests == []  # nothing was sent


def test_credentials_never_show_in_a_repr() -> None:
    credentials = AwsCredentials(ACCESS_KEY, SECRET_KEY, TOKEN, None)
    request = upstream.build("POST", "https://bedrock-runtime.eu-west-3.amazonaws.com/model/m/converse",
                             {"Content-Type": "application/json"}, b"{}", 5.0)
    signed = aws_signing.sign(request, credentials, region="eu-west-3")
    assert signed.headers["Authorization"].startswith("AWS4-HMAC-SHA256 ")
    assert "Signature=" not in repr(signed)
    assert TOKEN not in repr(signed)
    assert SECRET_KEY not in repr(credentials)
    assert TOKEN not in str(credentials)
    assert ACCESS_KEY not in repr(credentials)
    provider = bedrock("http://127.0.0.1:1", aws_keys=(ACCESS_KEY, SECRET_KEY, TOKEN))
    assert SECRET_KEY not in repr(provider)
    assert TOKEN not in repr(provider)
