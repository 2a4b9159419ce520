"""Capability escalation's pure part: what a request needs, what a tier's models lack, which tier serves it."""

from __future__ import annotations

import pytest

from routing.core.contracts import EffectiveContract
from routing.core.requirements import DeclaredTool
from routing.core.table import ModelSpec
from routing.core.tier_capability import CapabilityVerdict, capability_gap, capable_tier, wanted_capabilities

TEXT = EffectiveContract()
IMAGE = EffectiveContract(modalities=frozenset({"text", "image"}))


def model(name: str, *capabilities: str, enabled: bool = True) -> ModelSpec:
    return ModelSpec(name=name, provider="p", upstream=name, capabilities=frozenset({"text", *capabilities}),
                     enabled=enabled)


def test_a_request_wants_its_modalities_tools_schema_and_what_the_body_asks_for() -> None:
    contract = EffectiveContract(modalities=frozenset({"text", "image"}), needs_tools=True,
                                 tools=(DeclaredTool("f"),), schemas=({"type": "object"},))
    wanted = wanted_capabilities(contract, {"reasoning": "reasoning_effort"})
    assert wanted == {"text", "image", "tools", "json_schema", "reasoning"}
    assert wanted_capabilities(TEXT, {}) == {"text"}


def test_a_tier_can_serve_when_any_of_its_models_has_everything() -> None:
    models = [model("mini"), model("vision", "image")]
    assert capability_gap(models, wanted_capabilities(IMAGE, {})) is None


def test_a_tier_that_cannot_serve_names_what_its_closest_model_lacks() -> None:
    models = [model("mini"), model("vision", "image")]
    wanted = wanted_capabilities(IMAGE, {"reasoning": "reasoning_effort"})
    assert capability_gap(models, wanted) == ("reasoning",)
    assert capability_gap([model("mini"), model("other")], wanted) == ("image", "reasoning")


def test_a_disabled_model_does_not_serve_and_no_model_at_all_is_not_a_capability_matter() -> None:
    wanted = wanted_capabilities(IMAGE, {})
    assert capability_gap([model("vision", "image", enabled=False), model("mini")], wanted) == ("image",)
    assert capability_gap([], wanted) is None
    assert capability_gap([model("vision", "image", enabled=False)], wanted) is None


@pytest.mark.parametrize(
    ("chosen", "gaps", "expected"),
    [
        ("easy", {"easy": None}, CapabilityVerdict("easy", False, {})),
        ("easy", {"easy": ("image",), "hard": None}, CapabilityVerdict("hard", True, {"easy": ("image",)})),
        ("hard", {"hard": ("image",), "easy": None}, CapabilityVerdict("easy", True, {"hard": ("image",)})),
        ("easy", {"easy": ("image",), "hard": ("image", "tools")},
         CapabilityVerdict("easy", False, {"easy": ("image",), "hard": ("image", "tools")})),
    ],
)
def test_it_keeps_the_chosen_tier_moves_to_the_other_or_finds_none(
        chosen: str, gaps: dict[str, tuple[str, ...] | None], expected: CapabilityVerdict) -> None:
    verdict = capable_tier(chosen, gaps)
    assert verdict == expected
    assert verdict.servable == (len(expected.missing) < 2)


def test_a_refusal_names_every_capability_a_tier_lacks() -> None:
    verdict = capable_tier("easy", {"easy": ("image",), "hard": ("reasoning",)})
    assert not verdict.servable
    assert verdict.lacking == ("image", "reasoning")


def test_it_refuses_an_unknown_tier() -> None:
    with pytest.raises(ValueError, match="unknown tier"):
        capable_tier("medium", {})
