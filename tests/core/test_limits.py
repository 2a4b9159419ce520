"""The limit math: sliding windows, slots, budgets per UTC period, and what a refusal and the headers say."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from routing.core.limit_ledger import LimitLedger
from routing.core.limits import (
    Limits,
    LimitScope,
    format_reset,
    period_bounds,
    period_id,
    rate_limit_headers,
    retry_after_header,
)

T0 = datetime(2026, 12, 1, 12, 0, 0, tzinfo=UTC).timestamp()  # a Tuesday


def scope(kind: str = "key", name: str = "k", **limits: object) -> LimitScope:
    return LimitScope(kind, name, f"{kind}:{name}", Limits(**limits))  # type: ignore[arg-type]


def admit(ledger: LimitLedger, scopes: tuple[LimitScope, ...], now: float, rid: str = "") -> bool:
    return ledger.admit(scopes, rid or f"r{now}-{id(scopes)}-{len(ledger._scopes)}", now).admitted


def test_it_admits_a_burst_of_n_at_once_and_refuses_the_next() -> None:
    ledger = LimitLedger()
    scopes = (scope(rpm=30),)
    verdicts = [ledger.admit(scopes, f"r{i}", T0) for i in range(31)]
    assert [v.admitted for v in verdicts] == [True] * 30 + [False]
    refusal = verdicts[-1].refusal
    assert refusal is not None
    assert refusal.limit == "rpm"
    assert refusal.code == "rate_limit_exceeded"
    assert refusal.retry_after_s == pytest.approx(60.0)


def test_it_never_admits_more_than_n_in_any_60_seconds() -> None:
    """Requests every 0.5 s for five minutes against rpm 7: every 60 s window holds at most 7 admissions."""
    ledger = LimitLedger()
    scopes = (scope(rpm=7),)
    admitted = [T0 + i * 0.5 for i in range(600) if ledger.admit(scopes, f"r{i}", T0 + i * 0.5).admitted]
    for start in admitted:
        assert sum(1 for t in admitted if start <= t < start + 60) <= 7
    assert len(admitted) == 7 * 5  # and the limit is reached in every minute: nothing is lost either


def test_a_slot_of_the_window_frees_exactly_60_seconds_after_its_request() -> None:
    ledger = LimitLedger()
    scopes = (scope(rpm=2),)
    assert ledger.admit(scopes, "a", T0).admitted
    assert ledger.admit(scopes, "b", T0 + 10).admitted
    refused = ledger.admit(scopes, "c", T0 + 59.9)
    assert refused.refusal is not None
    assert refused.refusal.retry_after_s == pytest.approx(0.1)
    assert not ledger.admit(scopes, "d", T0 + 59.999).admitted
    assert ledger.admit(scopes, "e", T0 + 60).admitted  # the first left the window (now - 60, now]
    assert not ledger.admit(scopes, "f", T0 + 69.9).admitted
    assert ledger.admit(scopes, "g", T0 + 70).admitted


def test_the_headers_report_the_tightest_scope_and_when_room_grows() -> None:
    ledger = LimitLedger()
    scopes = (scope(rpm=10, tpm=1000), scope("team", "t", rpm=3, tpm=5000))
    ledger.admit(scopes, "a", T0)
    ledger.settle(scopes, "a", tokens=400, spend_nanos=0, now=T0 + 1)
    verdict = ledger.admit(scopes, "b", T0 + 6)
    headers = rate_limit_headers(verdict.requests, verdict.tokens)
    assert headers == {
        "x-ratelimit-limit-requests": "3", "x-ratelimit-remaining-requests": "1",
        "x-ratelimit-reset-requests": "54s",  # the first request leaves the window at T0 + 60
        "x-ratelimit-limit-tokens": "1000", "x-ratelimit-remaining-tokens": "600",
        "x-ratelimit-reset-tokens": "55s",
    }


def test_only_limited_dimensions_get_headers() -> None:
    verdict = LimitLedger().admit((scope(rpm=5),), "a", T0)
    assert set(rate_limit_headers(verdict.requests, verdict.tokens)) == {
        "x-ratelimit-limit-requests", "x-ratelimit-remaining-requests", "x-ratelimit-reset-requests"}


@pytest.mark.parametrize(("seconds", "text"), [
    (0, "0s"), (0.02, "20ms"), (0.0201, "21ms"), (1, "1s"), (6, "6s"), (5.2, "6s"), (59.5, "1m0s"),
    (60, "1m0s"), (61, "1m1s"), (3600, "1h0m0s"), (3723, "1h2m3s"),
])
def test_it_writes_resets_as_openai_does(seconds: float, text: str) -> None:
    assert format_reset(seconds) == text


def test_retry_after_is_whole_seconds_and_at_least_one() -> None:
    assert [retry_after_header(s) for s in (0.0, 0.2, 1.0, 1.01, 59.9)] == ["1", "1", "1", "2", "60"]


def test_tokens_admit_while_the_window_has_room_and_the_overshoot_is_what_was_in_flight() -> None:
    """tpm 1000, requests that reserve nothing: three admitted at once (room), each then uses 600 tokens. The
    window holds 1800 (the overshoot, 800, is what they used beyond their reservations), and nothing is admitted
    until it drops below 1000 again: when the second answer's one-second bucket has left the window."""
    ledger = LimitLedger()
    scopes = (scope(tpm=1000),)
    for rid in "abc":
        assert ledger.admit(scopes, rid, T0).admitted
    for i, rid in enumerate("abc"):
        ledger.settle(scopes, rid, tokens=600, spend_nanos=0, now=T0 + 1 + i)
    assert ledger.counts(scopes[0], T0 + 4).tokens == 1800
    refused = ledger.admit(scopes, "d", T0 + 4)
    assert refused.refusal is not None
    assert refused.refusal.limit == "tpm"
    assert refused.refusal.retry_after_s == pytest.approx(59.0)  # 1800 - 600 - 600 < 1000 at T0 + 2 + 1 + 60
    assert not ledger.admit(scopes, "e", T0 + 62.5).admitted  # 1200 left: still at or over
    assert ledger.admit(scopes, "f", T0 + 63).admitted


def test_concurrency_slots_are_held_until_settled_and_lapse_after_the_lease() -> None:
    ledger = LimitLedger(slot_lease_s=100)
    scopes = (scope(max_concurrency=2),)
    assert ledger.admit(scopes, "a", T0).admitted
    assert ledger.admit(scopes, "b", T0).admitted
    refused = ledger.admit(scopes, "c", T0 + 1)
    assert refused.refusal is not None
    assert refused.refusal.code == "concurrency_limit_exceeded"
    ledger.settle(scopes, "a", tokens=0, spend_nanos=0, now=T0 + 2)
    assert ledger.admit(scopes, "d", T0 + 2).admitted
    assert not ledger.admit(scopes, "e", T0 + 99).admitted
    assert ledger.admit(scopes, "f", T0 + 100).admitted  # "b" was never settled: its lease lapsed


def test_a_refusal_counts_nothing_anywhere() -> None:
    """The team refuses: the key's window must not count the request either."""
    ledger = LimitLedger()
    key, team = scope(rpm=5, max_concurrency=5), scope("team", "t", rpm=1)
    assert ledger.admit((key, team), "a", T0).admitted
    assert not ledger.admit((key, team), "b", T0).admitted
    counts = ledger.counts(key, T0)
    assert (counts.requests, counts.slots) == (1, 1)


def test_keys_of_one_team_share_its_limit() -> None:
    ledger = LimitLedger()
    team = scope("team", "t", rpm=3)
    one, two = (scope(name="one", rpm=10), team), (scope(name="two", rpm=10), team)
    assert [ledger.admit(s, f"r{i}", T0).admitted for i, s in enumerate((one, two, one, two))] == [
        True, True, True, False]
    refusal = ledger.admit(two, "x", T0).refusal
    assert refusal is not None
    assert refusal.scope.kind == "team"
    assert 'team "t"' in refusal.message()


def test_a_budget_admits_while_spend_is_below_it_and_resets_with_the_period() -> None:
    ledger = LimitLedger()
    scopes = (scope(budget_usd=1.0, budget_period="day"),)
    assert ledger.admit(scopes, "a", T0).admitted
    ledger.settle(scopes, "a", tokens=10, spend_nanos=999_999_999, now=T0)
    assert ledger.admit(scopes, "b", T0).admitted  # one nano-dollar of room left
    ledger.settle(scopes, "b", tokens=10, spend_nanos=2, now=T0)
    refused = ledger.admit(scopes, "c", T0 + 5)
    assert refused.refusal is not None
    assert refused.refusal.code == "budget_exceeded"
    assert refused.refusal.retry_after_s == pytest.approx(12 * 3600 - 5)  # midnight UTC
    assert "per day" in refused.refusal.message()
    midnight = datetime(2026, 12, 2, tzinfo=UTC).timestamp()
    assert not ledger.admit(scopes, "d", midnight - 0.001).admitted
    assert ledger.admit(scopes, "e", midnight).admitted


def test_a_total_budget_never_resets() -> None:
    ledger = LimitLedger()
    scopes = (scope(budget_usd=0.5, budget_period="total"),)
    ledger.admit(scopes, "a", T0)
    ledger.settle(scopes, "a", tokens=1, spend_nanos=500_000_000, now=T0)
    refused = ledger.admit(scopes, "b", T0 + 400 * 86400)
    assert refused.refusal is not None
    assert "does not reset" in refused.refusal.message()


@pytest.mark.parametrize(("period", "moment", "start", "end", "ident"), [
    ("day", (2026, 12, 1, 23, 59, 59), (2026, 12, 1), (2026, 12, 2), "day:2026-12-01"),
    ("week", (2026, 12, 1, 12, 0, 0), (2026, 11, 30), (2026, 12, 7), "week:2026-11-30"),  # Monday to Monday
    ("week", (2026, 11, 30, 0, 0, 0), (2026, 11, 30), (2026, 12, 7), "week:2026-11-30"),
    ("week", (2026, 11, 29, 23, 59, 59), (2026, 11, 23), (2026, 11, 30), "week:2026-11-23"),
    ("month", (2026, 12, 31, 23, 0, 0), (2026, 12, 1), (2027, 1, 1), "month:2026-12"),
    ("month", (2028, 2, 29, 1, 0, 0), (2028, 2, 1), (2028, 3, 1), "month:2028-02"),
])
def test_budget_periods_are_utc_calendar_periods(period: str, moment: tuple[int, ...], start: tuple[int, ...],
                                                 end: tuple[int, ...], ident: str) -> None:
    now = datetime(*moment, tzinfo=UTC).timestamp()
    assert period_bounds(period, now) == (datetime(*start, tzinfo=UTC).timestamp(),
                                          datetime(*end, tzinfo=UTC).timestamp())
    assert period_id(period, now) == ident


def test_total_has_no_end() -> None:
    assert period_bounds("total", T0) == (0.0, None)
    assert period_id("total", T0) == "total"


def test_spend_of_a_new_period_starts_from_zero() -> None:
    ledger = LimitLedger()
    scopes = (scope(budget_usd=1.0, budget_period="month"),)
    ledger.settle(scopes, "a", tokens=0, spend_nanos=10**9, now=T0)
    assert ledger.counts(scopes[0], T0).spend_nanos == 10**9
    january = datetime(2027, 1, 1, tzinfo=UTC).timestamp()
    assert ledger.counts(scopes[0], january).spend_nanos == 0


def test_the_limit_with_the_longest_wait_is_the_one_reported() -> None:
    """The key's rpm frees up in 30 s, the team's day budget at midnight: the 429 is the budget's."""
    ledger = LimitLedger()
    key, team = scope(rpm=1), scope("team", "t", budget_usd=0.0, budget_period="day")
    ledger.admit((key,), "a", T0)
    refusal = ledger.admit((key, team), "b", T0 + 30).refusal
    assert refusal is not None
    assert (refusal.scope.kind, refusal.limit) == ("team", "budget")
    assert refusal.retry_after_s == pytest.approx(12 * 3600 - 30)


def test_on_a_tie_the_key_comes_before_its_team() -> None:
    ledger = LimitLedger()
    key, team = scope(max_concurrency=1), scope("team", "t", max_concurrency=1)
    ledger.admit((key, team), "a", T0)
    refusal = ledger.admit((key, team), "b", T0).refusal
    assert refusal is not None
    assert (refusal.scope.kind, refusal.limit) == ("key", "concurrency")
    assert 'key "k"' in refusal.message()


@pytest.mark.parametrize("bad", [{"rpm": 0}, {"tpm": -1}, {"max_concurrency": 1.5}, {"budget_usd": -1.0},
                                 {"budget_usd": float("nan")}, {"budget_period": "year"}, {"rpm": True}])
def test_limits_refuse_values_that_mean_nothing(bad: dict[str, object]) -> None:
    with pytest.raises(ValueError, match=next(iter(bad))):
        Limits(**bad)  # type: ignore[arg-type]
