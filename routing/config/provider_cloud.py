"""Checks of a cloud provider's settings (Amazon Bedrock, Google Vertex AI), shared by the admin's form and the
config file, so both refuse the same values with the same words, and the default base URL each derives.

- ``bedrock``: ``region`` (an AWS region such as ``us-east-1``) is required. Credentials: the provider's
  ``api_key`` references, if any, are Amazon Bedrock API keys (sent as a bearer token); otherwise
  ``aws_access_key_id`` + ``aws_secret_access_key`` (+ ``aws_session_token``) references, if set, sign requests
  with SigV4; otherwise the usual AWS credential chain does (environment, ``AWS_PROFILE`` and the shared files,
  container and instance roles).
- ``vertex`` (Gemini models) and ``vertex_anthropic`` (Anthropic's models on Vertex AI): ``region`` (the Vertex
  location, such as ``us-central1`` or ``global``) and ``project`` (the Google Cloud project id) are required;
  ``credentials_file`` is a service-account JSON key, or empty for Application Default Credentials.

A field that means nothing for the provider's kind is refused rather than silently ignored. References are
checked like provider keys (``routing.config.provider_keys``); no value is ever put in a message.
"""

from __future__ import annotations

import re
from pathlib import PurePath

from routing.config.provider_keys import look_up
from routing.core.key_references import reference_variable

AWS_REFERENCE_FIELDS = ("aws_access_key_id", "aws_secret_access_key", "aws_session_token")
CLOUD_FIELDS = ("region", "project", "credentials_file", *AWS_REFERENCE_FIELDS)
BEDROCK_KINDS = frozenset({"bedrock"})
VERTEX_KINDS = frozenset({"vertex", "vertex_anthropic"})
CLOUD_KINDS = BEDROCK_KINDS | VERTEX_KINDS

_FIELDS_BY_KIND = {
    "bedrock": frozenset({"region", *AWS_REFERENCE_FIELDS}),
    "vertex": frozenset({"region", "project", "credentials_file"}),
    "vertex_anthropic": frozenset({"region", "project", "credentials_file"}),
}
_REGION = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
_PROJECT = re.compile(r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$")


def default_base_url(kind: str, region: str) -> str:
    """The public endpoint of a cloud kind in a region, or "" for any other kind."""
    if kind in BEDROCK_KINDS and region:
        return f"https://bedrock-runtime.{region}.amazonaws.com"
    if kind in VERTEX_KINDS and region:
        return "https://aiplatform.googleapis.com" if region == "global" else f"https://{region}-aiplatform.googleapis.com"
    return ""


def cloud_problems(kind: str, values: dict[str, str]) -> dict[str, str]:
    """Field name -> what is wrong with it, for the cloud fields in ``values`` (missing ones count as empty)."""
    problems: dict[str, str] = {}
    allowed = _FIELDS_BY_KIND.get(kind, frozenset())
    for name in CLOUD_FIELDS:
        if values.get(name) and name not in allowed:
            problems[name] = f"a {kind} provider has no {name} (it is for " + _kinds_using(name) + ")"
    if problems:
        return problems
    region = values.get("region", "")
    if kind in CLOUD_KINDS:
        if not region:
            example = "us-east-1" if kind in BEDROCK_KINDS else "us-central1 (or global)"
            problems["region"] = f"a {kind} provider needs a region, e.g. {example}"
        elif not _REGION.match(region):
            problems["region"] = f"{region!r} is not a region name such as us-east-1"
    if kind in VERTEX_KINDS:
        project = values.get("project", "")
        if not project:
            problems["project"] = "a Vertex AI provider needs its Google Cloud project id"
        elif not _PROJECT.match(project):
            problems["project"] = f"{project!r} is not a Google Cloud project id (6-30 lowercase letters, digits, -)"
        path = values.get("credentials_file", "")
        if path and not PurePath(path).is_absolute():
            problems["credentials_file"] = "expected an absolute path to a service-account JSON file"
    if kind in BEDROCK_KINDS:
        for name in AWS_REFERENCE_FIELDS:
            reference = values.get(name, "")
            if not reference:
                continue
            if reference_variable(reference) is None:
                # Never echo the value: it may be a raw secret pasted by mistake.
                problems[name] = ("expected a reference to an environment variable such as ${BEDROCK_AWS_SECRET};"
                                  " raw credentials are not accepted")
            elif (problem := look_up(reference).problem) is not None:
                problems[name] = problem
        has_id, has_secret = bool(values.get("aws_access_key_id")), bool(values.get("aws_secret_access_key"))
        if has_id != has_secret:
            missing = "aws_secret_access_key" if has_id else "aws_access_key_id"
            problems.setdefault(missing, "aws_access_key_id and aws_secret_access_key are given together")
        if values.get("aws_session_token") and not has_id:
            problems.setdefault("aws_session_token", "a session token needs aws_access_key_id and "
                                                     "aws_secret_access_key")
    return problems


def _kinds_using(name: str) -> str:
    kinds = sorted(kind for kind, fields in _FIELDS_BY_KIND.items() if name in fields)
    return " and ".join(kinds) + " providers"
