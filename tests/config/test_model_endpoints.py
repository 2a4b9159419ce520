"""A model's endpoints, dimensions and family: the config file (parsed, applied, dumped), the table, revisions,
and the virtual-model rule that keeps an embeddings fallback in the same vector space."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from audit.models import ConfigRevision
from routing import models as m
from routing.config.file.dump import dump_config
from routing.config.file.load import load_config_file
from routing.config.file.schema import ConfigError
from routing.config.runtime import compile_table
from routing.config.versioning import current_version

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def provider_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-openai")


def embedder(upstream: str, **fields: Any) -> dict[str, Any]:
    return {"provider": "openai", "upstream": upstream, "endpoints": ["embeddings"], "dimensions": 1536,
            "family": "text-embedding-3", **fields}


def config(*models: dict[str, Any], virtual: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    data: dict[str, Any] = {
        "providers": [{"name": "openai", "kind": "openai", "base_url": "http://127.0.0.1:1/v1",
                       "api_key": "${OPENAI_API_KEY}"}],
        "models": [{"provider": "openai", "upstream": "gpt-4o-mini"}, *models],
    }
    if virtual:
        data["virtual_models"] = virtual
    return data


def write(tmp_path: Path, data: object) -> str:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def test_endpoints_round_trip_through_the_file_the_table_and_the_revision(tmp_path: Path) -> None:
    result = load_config_file(write(tmp_path, config(embedder("text-embedding-3-small"))), author="test")

    row = m.ProviderModel.objects.get(name="openai/text-embedding-3-small")
    assert (row.endpoints, row.dimensions, row.family) == (["embeddings"], 1536, "text-embedding-3")
    assert m.ProviderModel.objects.get(name="openai/gpt-4o-mini").endpoints == ["chat"]  # the default
    dumped = dump_config()
    [chat, embedding] = dumped["models"]
    assert "endpoints" not in chat
    assert "dimensions" not in chat
    assert (embedding["endpoints"], embedding["dimensions"], embedding["family"]) == (
        ["embeddings"], 1536, "text-embedding-3")
    assert not load_config_file(write(tmp_path, dumped), author="test").changed  # the dump loads back equal
    table = compile_table(result.version)
    spec = table.models["openai/text-embedding-3-small"]
    assert (spec.endpoints, spec.dimensions, spec.family) == (frozenset({"embeddings"}), 1536, "text-embedding-3")
    assert table.models["openai/gpt-4o-mini"].endpoints == frozenset({"chat"})
    revision = ConfigRevision.objects.get(version=current_version())
    assert revision.snapshot["models"][1]["endpoints"] == ["embeddings"]


def test_changing_the_dimensions_is_a_new_version(tmp_path: Path) -> None:
    first = load_config_file(write(tmp_path, config(embedder("e3"))), author="test")
    second = load_config_file(write(tmp_path, config(embedder("e3", dimensions=256))), author="test")
    assert second.changed
    assert second.version > first.version
    assert m.ProviderModel.objects.get(name="openai/e3").dimensions == 256


@pytest.mark.parametrize(("model", "expected"), [
    (embedder("e3", endpoints=["audio"]), "models[1].endpoints: expected a list of chat, embeddings"),
    (embedder("e3", endpoints="embeddings"), "models[1].endpoints: expected a list of chat, embeddings"),
    (embedder("e3", dimensions=None), "models[1].dimensions: an embedding model needs its vector size"),
    (embedder("e3", dimensions=0), "models[1].dimensions: must be at least 1, got 0"),
    (embedder("e3", family=""), "models[1].family: an embedding model needs its family"),
    (embedder("e3", family=7), "models[1].family: expected a string, got int"),
    (embedder("e3", endpoints=["chat", "embeddings"]), "models[1].endpoints: a model serves either chat or "
                                                       "embeddings, not both"),
    ({"provider": "openai", "upstream": "gpt-5", "dimensions": 8}, "models[1].dimensions: only an embedding model"),
    ({"provider": "openai", "upstream": "gpt-5", "family": "x"}, "models[1].family: only an embedding model"),
])
def test_a_bad_embedding_model_is_refused_naming_the_field(tmp_path: Path, model: dict[str, Any],
                                                           expected: str) -> None:
    with pytest.raises(ConfigError) as refused:
        load_config_file(write(tmp_path, config(model)), author="test")
    assert any(problem.startswith(expected) for problem in refused.value.problems), refused.value.problems
    assert not m.ProviderModel.objects.exists()  # all or nothing


def virtual(*targets: str) -> list[dict[str, Any]]:
    return [{"source": "embed", "strategy": "failover", "targets": [{"model": t} for t in targets]}]


def test_a_virtual_model_over_one_family_and_size_loads(tmp_path: Path) -> None:
    result = load_config_file(write(tmp_path, config(
        embedder("a"), embedder("b", name="b-copy"), virtual=virtual("openai/a", "b-copy"))), author="test")
    table = compile_table(result.version)
    assert table.endpoints_of("embed") == frozenset({"embeddings"})
    assert table.endpoints_of("openai/gpt-4o-mini") == frozenset({"chat"})


@pytest.mark.parametrize(("second", "field"), [
    (embedder("b", family="gemini-embedding"), "family"),
    (embedder("b", dimensions=768), "dimensions"),
    ({"provider": "openai", "upstream": "b"}, "endpoints"),
])
def test_a_virtual_model_mixing_vector_spaces_is_refused_naming_the_field(tmp_path: Path, second: dict[str, Any],
                                                                         field: str) -> None:
    with pytest.raises(ConfigError) as refused:
        load_config_file(write(tmp_path, config(embedder("a"), second, virtual=virtual("openai/a", "openai/b"))),
                         author="test")
    assert any(p.startswith(f"virtual_models[0].targets: {field}:") for p in refused.value.problems), \
        refused.value.problems


def test_an_embedding_model_on_a_kind_without_embeddings_is_refused(tmp_path: Path) -> None:
    data = config()
    data["providers"].append({"name": "claude", "kind": "anthropic", "base_url": "http://127.0.0.1:1",
                              "api_key": "${OPENAI_API_KEY}"})
    data["models"].append(embedder("x", provider="claude"))
    with pytest.raises(ConfigError) as refused:
        load_config_file(write(tmp_path, data), author="test")
    assert any(p.startswith('models[1].endpoints: the provider "claude" (anthropic) has no embeddings')
               for p in refused.value.problems), refused.value.problems
