"""Bedrock and Vertex AI providers in the config file and the admin: region, project and credential references
accepted and compiled, the region's endpoint filled in, and every refusal naming its field without a value."""

from __future__ import annotations

import pytest
from django.test import Client

from routing import models as m
from routing.config.file.apply import apply_config
from routing.config.file.dump import dump_config
from routing.config.file.parse import parse_config
from routing.config.file.schema import ConfigError
from routing.config.provider_cloud import cloud_problems, default_base_url
from routing.config.runtime import compile_table

pytestmark = pytest.mark.django_db



def provider_post(**fields: str) -> dict[str, str]:
    return {"timeout_seconds": "600", "enabled": "on", "keys-TOTAL_FORMS": "0", "keys-INITIAL_FORMS": "0",
            "keys-MIN_NUM_FORMS": "0", "keys-MAX_NUM_FORMS": "1000", **fields}


def test_a_region_gives_the_public_endpoint_of_each_cloud() -> None:
    assert default_base_url("bedrock", "eu-central-1") == "https://bedrock-runtime.eu-central-1.amazonaws.com"
    assert default_base_url("vertex", "us-central1") == "https://us-central1-aiplatform.googleapis.com"
    assert default_base_url("vertex_anthropic", "global") == "https://aiplatform.googleapis.com"
    assert default_base_url("openai", "us-east-1") == ""


def test_the_config_file_takes_cloud_providers_fills_their_endpoints_and_compiles_their_credentials(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BEDROCK_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("BEDROCK_AWS_SECRET", "secret-for-tests")
    apply_config(parse_config({"providers": [
        {"name": "br", "kind": "bedrock", "region": "us-west-2",
         "aws_access_key_id": "${BEDROCK_ACCESS_KEY_ID}", "aws_secret_access_key": "${BEDROCK_AWS_SECRET}"},
        {"name": "vx", "kind": "vertex", "region": "europe-west4", "project": "acme-ml-prod",
         "credentials_file": "/etc/gomodel/vertex.json"},
        {"name": "vc", "kind": "vertex_anthropic", "region": "global", "project": "acme-ml-prod"},
    ]}), author="test")

    table = compile_table(1)
    br, vx, vc = table.providers["br"], table.providers["vx"], table.providers["vc"]
    assert br.base_url == "https://bedrock-runtime.us-west-2.amazonaws.com"
    assert [secret.reveal() for secret in br.aws_keys] == ["AKIDEXAMPLE", "secret-for-tests"]
    assert "secret-for-tests" not in repr(br)
    assert (vx.base_url, vx.region, vx.project, vx.credentials_file) == (
        "https://europe-west4-aiplatform.googleapis.com", "europe-west4", "acme-ml-prod", "/etc/gomodel/vertex.json")
    assert (vc.base_url, vc.aws_keys) == ("https://aiplatform.googleapis.com", ())
    dumped = {p["name"]: p for p in dump_config()["providers"]}
    assert dumped["br"]["aws_secret_access_key"] == "${BEDROCK_AWS_SECRET}"
    assert dumped["vx"]["project"] == "acme-ml-prod"
    assert "project" not in dumped["br"]


@pytest.mark.parametrize(("provider", "message"), [
    ({"name": "b", "kind": "bedrock"}, "providers[0].region: a bedrock provider needs a region, e.g. us-east-1"),
    ({"name": "b", "kind": "bedrock", "region": "US East"}, "providers[0].region: 'US East' is not a region name"),
    ({"name": "v", "kind": "vertex", "region": "us-central1"},
     "providers[0].project: a Vertex AI provider needs its Google Cloud project id"),
    ({"name": "v", "kind": "vertex", "region": "us-central1", "project": "p", "credentials_file": "key.json"},
     "providers[0].project: 'p' is not a Google Cloud project id"),
    ({"name": "v", "kind": "vertex", "region": "us-central1", "project": "acme-ml", "credentials_file": "key.json"},
     "providers[0].credentials_file: expected an absolute path"),
    ({"name": "o", "kind": "openai", "base_url": "https://x", "region": "us-east-1"},
     "providers[0].region: a openai provider has no region (it is for bedrock and vertex and vertex_anthropic"),
    ({"name": "v", "kind": "vertex", "region": "us-central1", "project": "acme-ml",
      "aws_access_key_id": "${AWS_ACCESS_KEY_ID}"},
     "providers[0].aws_access_key_id: a vertex provider has no aws_access_key_id (it is for bedrock providers)"),
    ({"name": "b", "kind": "bedrock", "region": "us-east-1", "aws_access_key_id": "${BEDROCK_ACCESS_KEY_ID}"},
     "providers[0].aws_secret_access_key: aws_access_key_id and aws_secret_access_key are given together"),
])
def test_the_config_file_refuses_a_bad_cloud_setting_naming_the_field(
        monkeypatch: pytest.MonkeyPatch, provider: dict[str, str], message: str) -> None:
    monkeypatch.setenv("BEDROCK_ACCESS_KEY_ID", "AKIDEXAMPLE")
    with pytest.raises(ConfigError) as caught:
        parse_config({"providers": [provider]})
    assert message in str(caught.value)


def test_a_raw_secret_in_a_credential_field_is_refused_and_never_echoed() -> None:
    raw = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
    problems = cloud_problems("bedrock", {"region": "us-east-1", "aws_access_key_id": "${BEDROCK_ID}",
                                          "aws_secret_access_key": raw})
    assert "raw credentials are not accepted" in problems["aws_secret_access_key"]
    assert raw not in repr(problems)


def test_the_admin_saves_a_bedrock_provider_with_its_regional_endpoint_and_refuses_vertex_without_a_project(
        admin_client: Client) -> None:
    saved = admin_client.post("/admin/routing/provider/add/", provider_post(
        name="br", kind="bedrock", base_url="", region="ap-northeast-1"))
    refused = admin_client.post("/admin/routing/provider/add/", provider_post(
        name="vx", kind="vertex", base_url="", region="us-central1"))

    assert saved.status_code == 302
    assert m.Provider.objects.get(name="br").base_url == "https://bedrock-runtime.ap-northeast-1.amazonaws.com"
    assert refused.status_code == 200
    errors = refused.context["adminform"].form.errors
    assert errors["project"] == ["a Vertex AI provider needs its Google Cloud project id"]
    assert not m.Provider.objects.filter(name="vx").exists()
