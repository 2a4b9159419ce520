"""Config revisions: the snapshot after each change, a readable diff, and no secrets."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from audit.configdiff import diff_snapshots, scrub_snapshot
from audit.models import ConfigRevision
from audit.services import config_revision_record

BASE: dict[str, Any] = {
    "providers": [
        {"name": "openai", "kind": "openai", "base_url": "http://127.0.0.1:18001/v1", "api_key": "${OPENAI_API_KEY}"},
        {"name": "anthropic", "kind": "anthropic", "base_url": "http://127.0.0.1:18002", "api_key": "${ANTHROPIC_KEY}"},
    ],
    "models": [
        {"provider": "openai", "upstream": "gpt-4o-mini", "input_price": 0.15, "output_price": 0.6},
        {"provider": "anthropic", "upstream": "claude", "input_price": 3.0, "output_price": 15.0},
    ],
    "virtual_models": [{"source": "normal-hard", "strategy": "adaptive", "targets": [{"model": "anthropic/claude"}]}],
    "tier_routes": {"normal": {"easy": "openai/gpt-4o-mini", "hard": "normal-hard"}},
    "settings": {"smart_routing_threshold": 4},
}


def test_the_diff_matches_entries_by_identity_not_position() -> None:
    new = copy.deepcopy(BASE)
    new["models"].insert(0, {"provider": "openai", "upstream": "gpt-5", "input_price": 1.25, "output_price": 10})
    new["models"][2]["input_price"] = 2.5
    new["settings"]["smart_routing_threshold"] = 6
    del new["providers"][1]
    diff, summary = diff_snapshots(BASE, new)
    lines = diff.splitlines()
    assert '+ models[openai/gpt-5]: {"input_price": 1.25, "output_price": 10, "provider": "openai", ' \
           '"upstream": "gpt-5"}' in lines
    assert "~ models[anthropic/claude].input_price: 3.0 -> 2.5" in lines
    assert "~ settings.smart_routing_threshold: 4 -> 6" in lines
    assert any(line.startswith("- providers[anthropic]: ") for line in lines)
    assert len(lines) == 4
    assert summary == "models: 1 added, 1 changed; providers: 1 removed; settings: 1 changed"


def test_the_first_revision_lists_every_entry() -> None:
    diff, summary = diff_snapshots(None, BASE)
    assert "+ providers[openai]: " in diff
    assert "+ tier_routes.normal: " in diff
    assert summary.startswith("initial configuration: 2 models, 2 providers")


def test_secrets_never_reach_the_snapshot() -> None:
    dirty = copy.deepcopy(BASE)
    dirty["providers"][0]["api_key"] = "sk-live-abcdefghijklmnopqrstuvwx"
    dirty["providers"][1]["headers"] = {"Authorization": "Bearer abcdefghijklmnopqrstuvwx"}
    dirty["providers"][1]["note"] = "rotated from sk-abcdefghijklmnopqrstuvwxyz"
    clean = scrub_snapshot(dirty)
    text = repr(clean)
    assert "abcdefghijklmnopqrstuvwx" not in text
    assert clean["providers"][0]["api_key"] == "[redacted]"
    assert clean["providers"][1]["api_key"] == "${ANTHROPIC_KEY}"
    assert clean["models"] == BASE["models"]


@pytest.mark.django_db
def test_it_records_each_version_once_with_author_and_diff() -> None:
    first = config_revision_record(version=1, author="alice", source="file", snapshot=BASE)
    changed = copy.deepcopy(BASE)
    changed["tier_routes"]["normal"]["hard"] = "anthropic/claude"
    second = config_revision_record(version=2, author="bob", source="admin", snapshot=changed)
    again = config_revision_record(version=2, author="mallory", source="admin", snapshot=BASE)
    assert again.pk == second.pk
    assert again.author == "bob"
    assert ConfigRevision.objects.count() == 2
    assert first.summary.startswith("initial configuration")
    assert second.diff == '~ tier_routes.normal.hard: "normal-hard" -> "anthropic/claude"'
    assert second.snapshot == changed
