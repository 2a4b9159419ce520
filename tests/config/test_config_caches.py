"""The config file's ``caches:`` section: loaded, checked (errors name the field), dumped back equal, pruned, and
a purge recorded as a configuration version that changes every key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from routing import models as m
from routing.config.cache_purge import purge_caches
from routing.config.file.caches import format_ttl, ttl_seconds
from routing.config.file.dump import dump_config, dump_yaml
from routing.config.file.load import load_config_file
from routing.config.file.parse import parse_config
from routing.config.file.schema import ConfigError
from routing.config.runtime import compile_table
from routing.config.versioning import current_version

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def provider_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-openai")


def config(**extra: Any) -> dict[str, Any]:
    return {
        "providers": [{"name": "openai", "kind": "openai", "base_url": "http://127.0.0.1:1/v1",
                       "api_key": "${OPENAI_API_KEY}"}],
        "models": [{"provider": "openai", "upstream": "gpt-4o-mini", "capabilities": ["text"]},
                   {"provider": "openai", "upstream": "embed", "endpoints": ["embeddings"], "dimensions": 8,
                    "family": "e"}],
        "virtual_models": [{"source": "pool", "strategy": "failover", "targets": [{"model": "openai/gpt-4o-mini"}]},
                           {"source": "embedders", "strategy": "failover", "targets": [{"model": "openai/embed"}]}],
        "tier_routes": {"normal": {"easy": "openai/gpt-4o-mini", "hard": "pool"}},
        **extra,
    }


CACHES = [
    {"model": "normal", "ttl": "10m", "scope": "team", "semantic": {"embeddings": "openai/embed", "threshold": 0.9}},
    {"model": "openai/gpt-4o-mini", "ttl": "1h30m"},
    {"model": "pool", "ttl": "45s", "scope": "global", "enabled": False},
]


def load(tmp_path: Path, data: dict[str, Any], *, prune: bool = False) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(data))
    load_config_file(str(path), author="test", prune=prune)


def test_caches_load_compile_and_dump_back_equal(tmp_path: Path) -> None:
    load(tmp_path, config(caches=CACHES))
    row = m.ResponseCache.objects.get(model="openai/gpt-4o-mini")
    assert (row.ttl_seconds, row.scope, row.enabled) == (5400, "key", True)
    assert dump_config()["caches"] == CACHES
    table = compile_table(current_version())
    assert sorted(table.caches) == ["normal", "openai/gpt-4o-mini"]  # a disabled cache caches nothing
    assert (table.caches["normal"].scope, table.caches["normal"].ttl_s) == ("team", 600.0)
    semantic = table.caches["normal"].semantic
    assert semantic is not None
    assert (semantic.embeddings, semantic.threshold) == ("openai/embed", 0.9)
    assert table.caches["openai/gpt-4o-mini"].semantic is None
    again = tmp_path / "again.yaml"
    again.write_text(dump_yaml(dump_config()))
    version = current_version()
    assert load_config_file(str(again), author="test").changed is False
    assert current_version() == version


def test_a_virtual_model_of_embedding_models_may_embed_and_the_default_threshold_is_left_out() -> None:
    parsed = parse_config(config(caches=[{"model": "pool", "ttl": "1m",
                                          "semantic": {"embeddings": "embedders", "threshold": 0.95}}]))
    assert parsed["caches"] == [{"model": "pool", "ttl": "1m", "semantic": {"embeddings": "embedders"}}]


def test_a_ttl_in_seconds_is_written_as_a_duration() -> None:
    parsed = parse_config(config(caches=[{"model": "normal", "ttl": 3600}]))
    assert parsed["caches"] == [{"model": "normal", "ttl": "1h"}]


@pytest.mark.parametrize(("seconds", "text"), [(1, "1s"), (60, "1m"), (90, "1m30s"), (3600, "1h"), (3661, "1h1m1s")])
def test_ttl_formatting_round_trips(seconds: int, text: str) -> None:
    assert format_ttl(seconds) == text
    assert ttl_seconds(text) == seconds


@pytest.mark.parametrize(("entry", "expected"), [
    ({"model": "nope", "ttl": "1m"}, 'caches[0].model: unknown name "nope"'),
    ({"ttl": "1m"}, "caches[0].model: expected the name of a model"),
    ({"model": "normal", "ttl": "soon"}, "caches[0].ttl: expected a duration"),
    ({"model": "normal", "ttl": 0}, "caches[0].ttl: expected a duration"),
    ({"model": "normal", "ttl": "721h"}, "caches[0].ttl: expected a duration"),
    ({"model": "normal", "ttl": "1.5s"}, "caches[0].ttl: expected a duration"),
    ({"model": "normal", "ttl": True}, "caches[0].ttl: expected a duration"),
    ({"model": "normal", "ttl": "1m", "scope": "org"}, "caches[0].scope: expected one of key, team, global"),
    ({"model": "normal", "ttl": "1m", "enabled": "yes"}, "caches[0].enabled"),
    ({"model": "normal", "ttl": "1m", "semantic": {"embeddings": "openai/gpt-4o-mini"}},
     "caches[0].semantic.embeddings: expected a model of this gateway that serves embeddings"),
    ({"model": "normal", "ttl": "1m", "semantic": {"embeddings": "openai/embed", "threshold": 0.2}},
     "caches[0].semantic.threshold: expected a cosine similarity from 0.5 to 1"),
    ({"model": "normal", "ttl": "1m", "semantic": {"embeddings": "openai/embed", "threshold": True}},
     "caches[0].semantic.threshold"),
    ({"model": "normal", "ttl": "1m", "semantic": {"embeddings": "openai/embed", "k": 3}},
     "caches[0].semantic.k: unknown field"),
    ({"model": "normal", "ttl": "1m", "semantic": "yes"}, "caches[0].semantic: expected {embeddings"),
    ({"model": "normal", "ttl": "1m", "size": 5}, "caches[0].size: unknown field"),
])
def test_a_bad_cache_is_refused_naming_the_field(entry: dict[str, Any], expected: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(config(caches=[entry]))
    assert any(problem.startswith(expected) for problem in caught.value.problems), caught.value.problems


def test_a_name_cached_twice_is_refused() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(config(caches=[{"model": "normal", "ttl": "1m"}, {"model": "normal", "ttl": "2m"}]))
    assert 'caches[1].model: "normal" appears twice' in caught.value.problems


def test_prune_deletes_unlisted_caches(tmp_path: Path) -> None:
    load(tmp_path, config(caches=CACHES))
    load(tmp_path, config(caches=CACHES[:1]), prune=True)
    assert list(m.ResponseCache.objects.values_list("model", flat=True)) == ["normal"]


def test_a_purge_is_a_new_version_whose_keys_differ(tmp_path: Path) -> None:
    load(tmp_path, config(caches=CACHES))
    version = current_version()
    before = compile_table(version).caches["normal"]
    assert purge_caches(["normal"], author="test", source="cli") == ["normal"]
    assert current_version() == version + 1
    after = compile_table(current_version()).caches["normal"]
    assert after.generation == before.generation + 1
    assert compile_table(current_version()).caches["openai/gpt-4o-mini"].generation == 0
    with pytest.raises(ValueError, match="no cache is configured for 'other'"):
        purge_caches(["other"], author="test", source="cli")
    load(tmp_path, config(caches=CACHES))  # reloading the file keeps the purge
    assert m.ResponseCache.objects.get(model="normal").generation == 1
