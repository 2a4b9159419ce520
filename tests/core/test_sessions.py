"""Session detection, the escalate-only tier pin, and the bounded TTL+LRU store (injected clock)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from routing.core.features import extract_features
from routing.core.sessions import SESSION_HEADERS, PinDecision, TtlLruStore, apply_tier_pin, detect_session

BODY_FIELDS = {"metadata": {"user_id": "meta-user"}, "session_id": "sess", "prompt_cache_key": "pck", "user": "u"}


def features(**body: Any) -> Any:
    body.setdefault("messages", [{"role": "user", "content": "hello"}])
    return extract_features(body, "anthropic")


def test_it_prefers_headers_in_the_documented_order() -> None:
    headers = {name: f"id-{i}" for i, name in enumerate(SESSION_HEADERS)}
    for i, name in enumerate(SESSION_HEADERS):
        session = detect_session(features(**BODY_FIELDS), headers, key_id=1)
        assert session.source == f"header:{name.lower()}"
        assert session == detect_session(features(), {name: f"id-{i}"}, key_id=1)
        del headers[name]


def test_it_falls_back_to_body_fields_in_the_documented_order() -> None:
    fields = dict(BODY_FIELDS)
    for source, field in [
        ("body:metadata.user_id", "metadata"),
        ("body:session_id", "session_id"),
        ("body:prompt_cache_key", "prompt_cache_key"),
        ("body:user", "user"),
    ]:
        assert detect_session(features(**fields), {}, key_id=1).source == source
        del fields[field]
    assert detect_session(features(**fields), {}, key_id=1).source == "auto"


@pytest.mark.parametrize(
    "headers", [{"x-session-id": "abc"}, {"X-Session-Id": "abc"}, {"x-session-id": "  abc "}], ids=str
)
def test_it_reads_headers_in_either_spelling_and_trims_them(headers: dict[str, str]) -> None:
    session = detect_session(features(), headers, key_id=1)
    assert session.source == "header:x-session-id"
    assert session.value == detect_session(features(), {"Session-Id": "abc"}, key_id=1).value


@pytest.mark.parametrize("name", [spelling for name in SESSION_HEADERS for spelling in (name, name.lower())])
def test_every_header_is_read_from_a_plain_dict_and_a_case_insensitive_mapping(name: str) -> None:
    from django.http.request import HttpHeaders

    plain = detect_session(features(), {"content-type": "application/json", name: "abc"}, key_id=1)
    insensitive = detect_session(features(), HttpHeaders({f"HTTP_{name.upper().replace('-', '_')}": "abc"}), key_id=1)
    assert plain.source == insensitive.source == f"header:{name.lower()}"
    assert plain.value == insensitive.value


def test_it_skips_blank_values() -> None:
    session = detect_session(features(session_id="  ", user="u"), {"X-Session-Id": " "}, key_id=1)
    assert session.source == "body:user"


def test_it_scopes_every_session_by_the_gateway_key() -> None:
    for headers, body in [({"X-Session-Id": "shared"}, {}), ({}, {"user": "shared"}), ({}, {})]:
        mine = detect_session(features(**body), headers, key_id=1)
        theirs = detect_session(features(**body), headers, key_id=2)
        assert mine != theirs
        assert mine.value.startswith("1:")
        assert theirs.value.startswith("2:")
        assert mine == detect_session(features(**body), headers, key_id=1)


def test_it_hashes_ids_so_raw_values_never_reach_a_store() -> None:
    session = detect_session(features(user="alice@example.com"), {}, key_id="k7")
    assert re.fullmatch(r"k7:[0-9a-f]{32}", session.value)
    assert "alice" not in session.value


def test_it_never_confuses_an_explicit_id_with_an_automatic_one() -> None:
    auto = detect_session(features(), {}, key_id=1)
    assert auto.source == "auto"
    values = {detect_session(features(), {name: auto.value}, key_id=1).value for name in SESSION_HEADERS}
    assert auto.value not in values


def conversation(*turns: str, system: str = "You are a helpful assistant.", **extra: Any) -> Any:
    messages = [{"role": ("user", "assistant")[i % 2], "content": text} for i, text in enumerate(turns)]
    return extract_features({"model": "normal", "system": system, "messages": messages, **extra}, "anthropic")


def auto_id(feats: Any) -> str:
    session = detect_session(feats, {}, key_id=1)
    assert session.source == "auto"
    return session.value


def test_it_keeps_the_automatic_id_stable_as_the_conversation_grows() -> None:
    first = auto_id(conversation("Plan a trip to Rome"))
    assert auto_id(conversation("Plan a trip to Rome", "Sure, when?", "In May")) == first
    assert auto_id(conversation("Plan a trip to Rome", "Sure, when?", "In May", "Great.", "Thanks!")) == first


def test_it_ignores_cache_markers_that_move_between_turns() -> None:
    marked = {"type": "text", "text": "Plan a trip to Rome", "cache_control": {"type": "ephemeral"}}
    turn_one = extract_features({"model": "normal", "system": "You are a helpful assistant.",
                                 "messages": [{"role": "user", "content": [marked]}]}, "anthropic")  # fmt: skip
    assert auto_id(turn_one) == auto_id(conversation("Plan a trip to Rome", "Sure", "May"))


@pytest.mark.parametrize(
    "other",
    [
        lambda: conversation("Plan a trip to Paris"),
        lambda: conversation("Plan a trip to Rome", system="You are a pirate."),
        lambda: conversation("Plan a trip to Rome", model="other"),
        lambda: conversation("Plan a trip to Rome", tools=[{"name": "search", "input_schema": {"type": "object"}}]),
    ],
    ids=["first user turn", "system prompt", "model", "tools"],
)
def test_it_gives_a_different_automatic_id_to_a_different_opening(other: Any) -> None:
    assert auto_id(other()) != auto_id(conversation("Plan a trip to Rome"))


def test_it_builds_the_automatic_id_from_tool_schemas_not_their_order_of_keys() -> None:
    a = {"name": "s", "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}}}
    b = {"input_schema": {"properties": {"q": {"type": "string"}}, "type": "object"}, "name": "s"}
    assert auto_id(conversation("x", tools=[a])) == auto_id(conversation("x", tools=[b]))


# (verdict, pin) -> (tier, escalated, pinned, new pin)
PIN_TABLE = [
    ("easy", None, PinDecision("easy", escalated=False, pinned=False, new_pin="easy")),
    ("hard", None, PinDecision("hard", escalated=False, pinned=False, new_pin="hard")),
    ("easy", "easy", PinDecision("easy", escalated=False, pinned=False, new_pin="easy")),
    ("hard", "easy", PinDecision("hard", escalated=True, pinned=False, new_pin="hard")),
    ("easy", "hard", PinDecision("hard", escalated=False, pinned=True, new_pin="hard")),
    ("hard", "hard", PinDecision("hard", escalated=False, pinned=False, new_pin="hard")),
    ("easy", "garbage", PinDecision("easy", escalated=False, pinned=False, new_pin="easy")),
]


@pytest.mark.parametrize(("verdict", "pin", "decision"), PIN_TABLE)
def test_it_only_ever_escalates_the_tier_pin(verdict: str, pin: str | None, decision: PinDecision) -> None:
    assert apply_tier_pin(verdict, pin) == decision


def test_it_keeps_a_hard_conversation_hard_until_the_pin_expires() -> None:
    store: TtlLruStore[str, str] = TtlLruStore(max_entries=10)
    ttl, now = 1800.0, 1000.0
    tiers = []
    for verdict in ["easy", "hard", "easy", "easy"]:  # "thanks!" after a hard turn stays hard
        decision = apply_tier_pin(verdict, store.get("s", now))
        store.put("s", decision.new_pin, now, ttl)
        tiers.append(decision.tier)
        now += 60
    assert tiers == ["easy", "hard", "hard", "hard"]
    now += ttl  # a whole TTL of silence
    assert apply_tier_pin("easy", store.get("s", now)).tier == "easy"


def test_it_slides_the_expiry_on_every_read() -> None:
    store: TtlLruStore[str, str] = TtlLruStore(max_entries=10)
    store.put("s", "hard", now=0.0, ttl=10.0)
    for now in (9.0, 18.0, 27.0):  # each read lands within 10 s of the previous one
        assert store.get("s", now) == "hard"
    assert store.get("s", 36.9) == "hard"
    assert store.get("s", 46.9) is None  # exactly 10 s after the last read: expired
    assert len(store) == 0  # an expired entry is dropped when met


def test_it_expires_an_entry_after_its_own_ttl_without_reads() -> None:
    store: TtlLruStore[str, int] = TtlLruStore(max_entries=10)
    store.put("short", 1, now=0.0, ttl=5.0)
    store.put("long", 2, now=0.0, ttl=50.0)
    assert store.get("short", 4.999) == 1
    assert store.get("short", 9.999) is None
    assert store.get("long", 49.0) == 2


def test_it_evicts_the_least_recently_used_entry_beyond_its_bound() -> None:
    store: TtlLruStore[int, str] = TtlLruStore(max_entries=3)
    for key in range(3):
        store.put(key, f"v{key}", now=0.0, ttl=100.0)
    assert store.get(0, now=1.0) == "v0"  # 0 is now the most recently used; 1 the least
    store.put(3, "v3", now=2.0, ttl=100.0)
    assert len(store) == 3
    assert store.get(1, now=3.0) is None
    assert [store.get(k, now=3.0) for k in (0, 2, 3)] == ["v0", "v2", "v3"]


def test_it_stays_bounded_under_many_keys() -> None:
    store: TtlLruStore[int, int] = TtlLruStore(max_entries=100)
    for key in range(10_000):
        store.put(key, key, now=float(key), ttl=1e9)
    assert len(store) == 100
    assert store.get(9_999, now=1e4) == 9_999
    assert store.get(9_899, now=1e4) is None


def test_it_deletes_and_treats_a_non_positive_ttl_as_delete() -> None:
    store: TtlLruStore[str, str] = TtlLruStore(max_entries=3)
    store.put("a", "x", now=0.0, ttl=10.0)
    store.delete("a")
    store.delete("missing")
    assert store.get("a", 1.0) is None
    store.put("b", "x", now=0.0, ttl=10.0)
    store.put("b", "y", now=0.0, ttl=0)
    assert store.get("b", 1.0) is None
    assert len(store) == 0


def test_it_upserts_atomically_and_returns_the_previous_live_value() -> None:
    store: TtlLruStore[str, str] = TtlLruStore(max_entries=3)
    assert store.upsert("s", lambda prev: prev or "easy", now=0.0, ttl=10.0) is None
    assert store.upsert("s", lambda prev: "hard", now=5.0, ttl=10.0) == "easy"
    assert store.upsert("s", lambda prev: prev or "easy", now=30.0, ttl=10.0) is None  # the old one expired
    assert store.get("s", 31.0) == "easy"


def test_it_rejects_a_store_without_room() -> None:
    with pytest.raises(ValueError):
        TtlLruStore(max_entries=0)
