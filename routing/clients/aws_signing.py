"""SigV4 signatures for Bedrock requests, computed over the exact bytes that will be sent.

An attempt (and a probe) builds its request as for any provider and serializes the body once; then, for a
``bedrock`` provider without an API key, ``sign`` adds ``X-Amz-Date``, ``X-Amz-Security-Token`` (temporary
credentials only) and ``Authorization: AWS4-HMAC-SHA256 Credential=..., SignedHeaders=..., Signature=...``
with botocore's own signer (service ``bedrock``, the provider's region; the body's SHA-256 is part of the
signed canonical request). Signing is CPU only (a few HMACs); the credentials come from ``aws_credentials``
(cached, refreshed off the event loop). A provider with an API key sends ``Authorization: Bearer`` and is never signed.
"""

from __future__ import annotations

import dataclasses

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from routing.clients.aws_credentials import AwsCredentials
from routing.clients.upstream import UpstreamRequest
from routing.core.table import ProviderSpec

SERVICE = "bedrock"  # the signing name of bedrock-runtime (and of bedrock's control plane)
SIGNED_KINDS = frozenset({"bedrock"})


def needs_signature(provider: ProviderSpec, api_key: str) -> bool:
    """Whether requests to ``provider`` are signed: a Bedrock provider without an API key."""
    return provider.kind in SIGNED_KINDS and not api_key


def sign(request: UpstreamRequest, credentials: AwsCredentials, *, region: str) -> UpstreamRequest:
    """``request`` with SigV4 headers over its method, URL, headers and exact body."""
    aws_request = AWSRequest(method=request.method, url=request.url, data=request.body,
                             headers=dict(request.headers))
    signer = SigV4Auth(Credentials(credentials.access_key, credentials.secret_key, credentials.token or None),
                       SERVICE, region)
    signer.add_auth(aws_request)
    return dataclasses.replace(request, headers=dict(aws_request.headers.items()))
