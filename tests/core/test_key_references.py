"""Which variables a provider key reference may name: reserved names, patterns and the allow-list."""

from __future__ import annotations

import pytest

from routing.core.key_references import ReferencePolicy, parse_allow_list, reference_variable

POLICY = ReferencePolicy(
    reserved_names=frozenset({"DATABASE_URL", "PROMETHEUS_MULTIPROC_DIR", "HTTPS_PROXY"}),
    reserved_prefixes=("DJANGO_", "GOMODEL_", "PG"),
    reserved_suffixes=("_PASSWORD",),
)


@pytest.mark.parametrize(
    ("reference", "variable"),
    [("${OPENAI_API_KEY}", "OPENAI_API_KEY"), ("os.environ/AZURE_KEY", "AZURE_KEY"), (" ${_X1} ", "_X1"),
     ("$OPENAI_API_KEY", None), ("${1ABC}", None), ("${A-B}", None), ("sk-proj-abcdef", None), ("", None)],
)
def test_it_reads_the_variable_a_reference_names(reference: str, variable: str | None) -> None:
    assert reference_variable(reference) == variable


@pytest.mark.parametrize(
    ("variable", "rule"),
    [("DATABASE_URL", "DATABASE_URL"), ("database_url", "DATABASE_URL"), ("https_proxy", "HTTPS_PROXY"),
     ("DJANGO_SECRET_KEY", "DJANGO_*"), ("GOMODEL_MASTER_KEY", "GOMODEL_*"), ("PGPASSWORD", "PG*"),
     ("SMTP_PASSWORD", "*_PASSWORD"), ("OPENAI_API_KEY", None), ("GOOGLE_API_KEY", None), ("PROVIDER_X", None)],
)
def test_it_names_the_rule_that_reserves_a_variable(variable: str, rule: str | None) -> None:
    assert POLICY.reserved_by(variable) == rule


def test_it_refuses_a_reserved_variable_saying_why_without_any_value() -> None:
    refusal = POLICY.refusal("DJANGO_SECRET_KEY")
    assert refusal is not None
    assert refusal.startswith("DJANGO_SECRET_KEY is reserved (DJANGO_*) for the gateway's own settings")
    assert (POLICY.refusal("DATABASE_URL") or "").startswith("DATABASE_URL is reserved for")
    assert POLICY.refusal("OPENAI_API_KEY") is None


def test_it_narrows_references_to_the_allow_list_but_never_opens_a_reserved_name() -> None:
    policy = ReferencePolicy(
        reserved_names=frozenset({"DATABASE_URL"}), reserved_prefixes=("DJANGO_",),
        allowed=("OPENAI_*", "ANTHROPIC_API_KEY", "DJANGO_*", "DATABASE_URL"),
    )
    assert policy.refusal("OPENAI_API_KEY") is None
    assert policy.refusal("OPENAI_") is None
    assert policy.refusal("ANTHROPIC_API_KEY") is None
    assert policy.refusal("ANTHROPIC_API_KEY_2") == (
        "ANTHROPIC_API_KEY_2 is not in GOMODEL_PROVIDER_KEY_ENV_ALLOW (OPENAI_*, ANTHROPIC_API_KEY, DJANGO_*, "
        "DATABASE_URL)"
    )
    assert policy.refusal("openai_api_key") is not None  # the environment is case-sensitive, so is the list
    assert "reserved" in (policy.refusal("DJANGO_SECRET_KEY") or "")
    assert "reserved" in (policy.refusal("DATABASE_URL") or "")


def test_it_accepts_names_and_prefix_patterns_in_the_allow_list() -> None:
    assert parse_allow_list(["OPENAI_*", "ANTHROPIC_API_KEY", "_X"]) == ("OPENAI_*", "ANTHROPIC_API_KEY", "_X")
    for bad in ("*", "OPENAI-*", "OPEN*AI", "${OPENAI_API_KEY}", "1ABC", "A B"):
        with pytest.raises(ValueError, match="not a variable name or a prefix pattern"):
            parse_allow_list([bad])
