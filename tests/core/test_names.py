"""Help with public names: slash-free aliases (never colliding) and the nearest names to a misspelt one."""

from __future__ import annotations

import pytest

from routing.core.names import (
    AliasedModels,
    alias_collisions,
    did_you_mean,
    model_aliases,
    nearest_names,
    slash_free_alias,
)
from routing.core.table import KeySpec, ModelSpec, RoutingTable, TeamSpec, VirtualModelSpec


@pytest.mark.parametrize(("name", "alias"), [
    ("sim-anthropic/claude", "sim-anthropic--claude"),
    ("openrouter/anthropic/claude-3", "openrouter--anthropic--claude-3"),
    ("normal", None),
])
def test_it_spells_each_slash_as_two_hyphens(name: str, alias: str | None) -> None:
    assert slash_free_alias(name) == alias


def test_it_reports_an_alias_that_is_another_public_name_or_another_models_alias() -> None:
    problems = alias_collisions(["a/b", "c/d", "c--d/x", "c/d/x", "e/f"], ["a--b"])
    assert problems["a/b"] == 'its slash-free alias "a--b" is already a public name; rename one of the two'
    assert '"c--d--x" is also the alias of "c/d/x"' in problems["c--d/x"]
    assert '"c--d--x" is also the alias of "c--d/x"' in problems["c/d/x"]
    assert "c/d" not in problems
    assert "e/f" not in problems


def test_it_gives_aliases_only_to_models_whose_alias_collides_with_nothing() -> None:
    assert model_aliases(["a/b", "c/d", "plain"], ["c--d"]) == {"a--b": "a/b"}


def test_it_suggests_the_nearest_names_closest_first() -> None:
    names = ["normal", "normal-easy", "normal-hard", "frontier", "openai/gpt-4o"]
    assert nearest_names("nomral", names)[0] == "normal"
    assert did_you_mean("nomral", ["normal", "frontier"]) == " Did you mean `normal`?"
    assert did_you_mean("zzzz", names) == ""
    assert did_you_mean("NORMAL-EASI", names).startswith(" Did you mean `normal-easy`")


def test_it_matches_a_slash_free_spelling_to_the_model() -> None:
    assert nearest_names("openai--gpt-4", ["openai/gpt-4o", "anthropic/claude"]) == ["openai/gpt-4o"]


def test_the_table_answers_an_alias_as_the_model_and_iterates_each_model_once() -> None:
    model = ModelSpec(name="sim-anthropic/claude", provider="sim-anthropic", upstream="claude")
    table = RoutingTable.build(version=1, models=[model, ModelSpec(name="plain", provider="p", upstream="x")])
    assert table.models["sim-anthropic--claude"] is model
    assert table.kind_of("sim-anthropic--claude") == "model"
    assert table.leaf_models("sim-anthropic--claude") == (model,)
    assert list(table.models) == ["sim-anthropic/claude", "plain"]
    assert len(table.models) == 2
    assert [m.name for m in table.models.values()] == ["sim-anthropic/claude", "plain"]
    assert table.public_names() == ("sim-anthropic/claude", "plain", "sim-anthropic--claude")
    assert table.public_name_of("sim-anthropic--claude") == "sim-anthropic/claude"
    assert table.public_name_of("plain") == "plain"
    assert isinstance(table.models, AliasedModels)


def test_an_alias_never_shadows_a_public_name() -> None:
    table = RoutingTable.build(
        version=1, models=[ModelSpec(name="a/b", provider="a", upstream="b")],
        virtual_models=[VirtualModelSpec("a--b", "failover", ())])
    assert table.kind_of("a--b") == "virtual"
    assert "a--b" not in table.models
    assert table.public_names().count("a--b") == 1


def test_a_key_listing_a_model_may_use_its_alias() -> None:
    team = TeamSpec("t", allowed_models=frozenset({"a/b"}))
    key = KeySpec(id=1, name="k", secret_hash="h", allowed_models=frozenset({"a/b"}), team=team)
    table = RoutingTable.build(version=1, models=[ModelSpec(name="a/b", provider="a", upstream="b"),
                                                  ModelSpec(name="c/d", provider="c", upstream="d")], keys=[key])
    compiled = table.keys_by_hash["h"]
    assert compiled.allows("a--b")
    assert compiled.allows("a/b")
    assert not compiled.allows("c--d")


def test_it_names_one_spelling_of_a_model_the_one_the_asker_used() -> None:
    names = ["openai/gpt-4o", "openai--gpt-4o"]
    assert nearest_names("openai/gpt4o", names) == ["openai/gpt-4o"]
    assert nearest_names("openai--gpt4o", names) == ["openai--gpt-4o"]
    assert nearest_names("openai-gpt4o", list(reversed(names))) == ["openai/gpt-4o"]


def test_the_aliased_models_answer_a_name_an_alias_and_an_unknown_name_as_a_mapping_does() -> None:
    models = AliasedModels({"sim/a": "A", "b": "B"}, {"a": "sim/a"})
    assert (models["sim/a"], models["a"], models["b"]) == ("A", "A", "B")
    assert (models.get("a"), models.get("b"), models.get("nope"), models.get("nope", "D")) == ("A", "B", None, "D")
    assert models.get("a", "D") == "A"
    with pytest.raises(KeyError):
        models["nope"]
    assert "a" in models
    assert "nope" not in models
    assert list(models) == ["sim/a", "b"]
    assert dict(models.items()) == {"sim/a": "A", "b": "B"}
