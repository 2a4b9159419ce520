"""A reference ``${NAME}`` falls back to the file ``NAME_FILE`` names, so ``NAME_FILE`` is checked like ``NAME``."""

from __future__ import annotations

import pytest

from routing.core.key_references import ReferencePolicy

POLICY = ReferencePolicy(
    reserved_names=frozenset({"AWS_WEB_IDENTITY_TOKEN_FILE", "DATABASE_URL"}),
    reserved_prefixes=("DJANGO_",),
    reserved_suffixes=("_PASSWORD",),
)


def test_it_refuses_a_reference_whose_file_form_is_reserved_naming_that_form() -> None:
    assert POLICY.reserved_by("AWS_WEB_IDENTITY_TOKEN") == "AWS_WEB_IDENTITY_TOKEN_FILE"
    refusal = POLICY.refusal("AWS_WEB_IDENTITY_TOKEN")
    assert refusal is not None
    assert refusal.startswith("AWS_WEB_IDENTITY_TOKEN is reserved (AWS_WEB_IDENTITY_TOKEN_FILE) for the gateway's")


@pytest.mark.parametrize("variable", ["aws_web_identity_token", "AWS_WEB_IDENTITY_TOKEN_FILE", "DATABASE_URL"])
def test_it_refuses_the_name_and_its_file_form_alike(variable: str) -> None:
    assert POLICY.refusal(variable) is not None


def test_it_leaves_a_name_free_when_neither_it_nor_its_file_form_is_reserved() -> None:
    assert POLICY.reserved_by("OPENAI_API_KEY") is None
    assert POLICY.refusal("OPENAI_API_KEY") is None


def test_the_allow_list_never_opens_a_name_whose_file_form_is_reserved() -> None:
    policy = ReferencePolicy(reserved_names=frozenset({"AWS_WEB_IDENTITY_TOKEN_FILE"}), allowed=("AWS_*",))
    assert "reserved" in (policy.refusal("AWS_WEB_IDENTITY_TOKEN") or "")
    assert policy.refusal("AWS_BEARER_TOKEN_BEDROCK") is None
