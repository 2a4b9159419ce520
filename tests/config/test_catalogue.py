"""The bundled price catalogue: every entry complete, typed, dated and sourced; a bad file refused entry by entry."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from urllib.parse import urlsplit

import pytest
import yaml

from routing.config.catalogue import (
    CATALOGUE_FILE,
    CatalogueError,
    catalogue,
    parse_catalogue,
)
from routing.core.table import CAPABILITIES, PROVIDER_KINDS

TODAY = dt.date(2026, 12, 2)
# The hosts each kind's figures may be read from: the provider's own pages, never a reseller's.
OFFICIAL_HOSTS = {
    "openai": {"developers.openai.com", "platform.openai.com", "openai.com"},
    "anthropic": {"platform.claude.com", "docs.anthropic.com", "www.anthropic.com", "www.claude.com"},
    "gemini": {"ai.google.dev"},
    "vertex": {"cloud.google.com"},
    "cohere": {"cohere.com", "docs.cohere.com"},
    "bedrock": {"aws.amazon.com"},
}


def raw_entries() -> list[dict]:
    return yaml.safe_load(CATALOGUE_FILE.read_text(encoding="utf-8"))["entries"]


def good_entry(**changes: object) -> dict:
    entry = {"kind": "openai", "upstream": "gpt-4o-mini", "input_price": 0.15, "output_price": 0.6,
             "cached_input_price": 0.075, "context_window": 128000, "max_output_tokens": 16384,
             "capabilities": ["text", "image"], "as_of": dt.date(2026, 12, 1),
             "source": "https://developers.openai.com/api/docs/models/gpt-4o-mini"}
    entry.update(changes)
    return {k: v for k, v in entry.items() if v is not None}


def test_it_loads_the_bundled_catalogue_once() -> None:
    assert catalogue() is catalogue()
    assert len(catalogue().entries) >= 25


def test_it_holds_every_entry_with_its_fields_date_and_official_source() -> None:
    entries = raw_entries()
    for raw in entries:
        where = f"{raw.get('kind')} {raw.get('upstream')}"
        assert raw["kind"] in PROVIDER_KINDS, where
        assert isinstance(raw["upstream"], str), where
        assert raw["upstream"].strip() == raw["upstream"], where
        for price in ("input_price", "output_price"):
            assert isinstance(raw[price], int | float), where
            assert raw[price] >= 0, where
        assert raw["output_price"] >= raw["input_price"], where  # no listed model bills output below input
        if "cached_input_price" in raw:
            assert 0 <= raw["cached_input_price"] <= raw["input_price"], where
        assert isinstance(raw["context_window"], int), where
        assert raw["context_window"] >= 1000, where
        if "max_output_tokens" in raw:
            assert isinstance(raw["max_output_tokens"], int)
            assert 1 <= raw["max_output_tokens"] <= raw["context_window"], where
        assert raw["capabilities"][0] == "text", where
        assert set(raw["capabilities"]) <= set(CAPABILITIES), where
        assert isinstance(raw["as_of"], dt.date), where
        assert dt.date(2026, 1, 1) <= raw["as_of"] <= dt.date.today(), where
        source = urlsplit(raw["source"])
        assert source.scheme == "https", where
        assert source.netloc in OFFICIAL_HOSTS[raw["kind"]], where
    loaded = catalogue()
    assert len({(raw["kind"], raw["upstream"]) for raw in entries}) == len(entries)
    for raw in entries:
        entry = loaded.lookup(raw["kind"], raw["upstream"])
        assert entry is not None
        assert entry.input_price == Decimal(str(raw["input_price"]))
        assert entry.as_of == raw["as_of"]
        assert entry.source == raw["source"]


def test_it_catalogues_each_provider_kind_with_public_list_prices() -> None:
    kinds = {kind for kind, _ in catalogue().entries}
    assert {"openai", "anthropic", "gemini", "vertex", "cohere", "bedrock"} <= kinds
    # A few figures pinned, as printed on the providers' pages on the entries' date.
    mini = catalogue().lookup("openai", "gpt-4o-mini")
    assert mini is not None
    assert (mini.input_price, mini.cached_input_price, mini.output_price) == (
        Decimal("0.15"), Decimal("0.075"), Decimal("0.6"))
    haiku = catalogue().lookup("anthropic", "claude-haiku-4-5-20251001")
    assert haiku is not None
    assert (haiku.context_window, haiku.max_output_tokens) == (200000, 64000)


def test_it_finds_an_anthropic_model_by_its_undated_alias() -> None:
    assert catalogue().lookup("anthropic", "claude-sonnet-4-5") is catalogue().lookup(
        "anthropic", "claude-sonnet-4-5-20250929")
    assert catalogue().lookup("openai", "claude-sonnet-4-5") is None


def test_it_suggests_the_closest_catalogued_names_of_the_same_kind() -> None:
    assert catalogue().close_names("openai", "gpt-4o-mni")[0] == "gpt-4o-mini"
    assert catalogue().close_names("cohere", "gpt-4o-mini") == []


@pytest.mark.parametrize(("change", "expected"), [
    ({"kind": "openia"}, "entries[0].kind: unknown provider kind 'openia'"),
    ({"upstream": None}, "entries[0].upstream: missing"),
    ({"input_price": -1}, "entries[0].input_price: expected a number of at least 0, got -1"),
    ({"output_price": "0.6"}, "entries[0].output_price: expected a number, got '0.6'"),
    ({"context_window": 128000.5}, "entries[0].context_window: expected a whole number, got 128000.5"),
    ({"max_output_tokens": 0}, "entries[0].max_output_tokens: expected a number of at least 1, got 0"),
    ({"capabilities": ["image"]}, "entries[0].capabilities: expected a list of distinct"),
    ({"capabilities": ["text", "telepathy"]}, "entries[0].capabilities: expected a list of distinct"),
    ({"as_of": "2026-12-01"}, "entries[0].as_of: expected a date such as 2026-12-02, got '2026-12-01'"),
    ({"as_of": dt.date(2026, 12, 3)}, "entries[0].as_of: 2026-12-03 is in the future"),
    ({"source": "http://example.com/prices"}, "entries[0].source: expected the https:// address of the page read"),
    ({"source": None}, "entries[0].source: missing"),
    ({"cached_input_price": 0.3}, "entries[0].cached_input_price: a cache hit costing more than the input price"),
    ({"aliases": ["gpt-4o-mini"]}, "entries[0].aliases: expected a list of the provider's other names"),
    ({"price": 1}, "entries[0].price: unknown field"),
])
def test_it_refuses_a_bad_entry_naming_its_index_and_field(change: dict, expected: str) -> None:
    raw = good_entry()
    raw.update(change)
    raw = {k: v for k, v in raw.items() if v is not None}
    with pytest.raises(CatalogueError) as caught:
        parse_catalogue({"entries": [raw]}, today=TODAY)
    assert any(problem.startswith(expected) for problem in caught.value.problems), caught.value.problems


def test_it_refuses_an_entry_listed_twice_and_a_file_of_another_shape() -> None:
    with pytest.raises(CatalogueError) as caught:
        parse_catalogue({"entries": [good_entry(), good_entry(input_price=0.2)]}, today=TODAY)
    assert caught.value.problems == ["entries[1]: openai gpt-4o-mini is listed twice"]
    with pytest.raises(CatalogueError, match="one key, entries"):
        parse_catalogue([good_entry()], today=TODAY)
    with pytest.raises(CatalogueError) as caught:
        parse_catalogue({"entries": ["gpt-4o-mini"]}, today=TODAY)
    assert caught.value.problems == ["entries[0]: expected a mapping"]


def test_it_flags_prices_older_than_the_entry_only_when_they_differ() -> None:
    loaded = parse_catalogue({"entries": [good_entry()]}, today=TODAY)
    current = {"input_price": Decimal("0.15"), "output_price": Decimal("0.6"), "cached_input_price": Decimal("0.075")}
    old = {**current, "output_price": Decimal("0.9")}
    assert not loaded.is_stale("openai", "gpt-4o-mini", current, None)
    assert loaded.is_stale("openai", "gpt-4o-mini", old, None)
    assert loaded.is_stale("openai", "gpt-4o-mini", old, dt.date(2026, 11, 30))
    assert not loaded.is_stale("openai", "gpt-4o-mini", old, dt.date(2026, 12, 1))  # set by hand on or after
    assert not loaded.is_stale("openai", "gpt-5", old, None)  # not catalogued: nothing to compare with
    assert not loaded.is_stale("openai", "gpt-4o-mini", {}, None)  # unpriced: no price to be older
