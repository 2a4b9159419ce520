"""Provider-side rpm/tpm windows: counted at dispatch and from usage, 61 one-second buckets, shared totals."""

from __future__ import annotations

import pytest

from routing.core.provider_limits import AT_RPM, AT_TPM, ProviderLimits, QuotaRegistry, TargetQuota


def test_it_admits_rpm_requests_then_refuses_without_counting_the_refusal() -> None:
    quota = TargetQuota("a", ProviderLimits(rpm=3))
    assert [quota.dispatch(100.0 + i * 0.1) for i in range(3)] == [None, None, None]
    assert quota.dispatch(100.5) == AT_RPM
    assert quota.counts(100.5) == (3, 0)  # the refused request was not counted


def test_a_request_leaves_the_window_60_to_61_seconds_after_it_was_sent_never_earlier() -> None:
    quota = TargetQuota("a", ProviderLimits(rpm=1))
    assert quota.dispatch(100.9) is None
    assert quota.blocked(160.8) == AT_RPM  # 59.9 s later: still in the window
    assert quota.blocked(160.95) == AT_RPM  # 60.05 s later: the whole second 100 still counts
    assert quota.blocked(161.0) is None  # second 100 has left


def test_tokens_count_from_usage_and_block_at_tpm() -> None:
    quota = TargetQuota("a", ProviderLimits(tpm=1000))
    assert quota.dispatch(10.0) is None
    quota.add_tokens(600, 10.2)
    assert quota.blocked(10.3) is None  # 600 < 1000: there is room, the next request may go
    assert quota.dispatch(10.3) is None
    quota.add_tokens(500, 10.4)  # the overshoot is what was in flight
    assert quota.blocked(10.5) == AT_TPM
    assert quota.counts(10.5) == (2, 1100)


def test_it_says_when_the_oldest_count_leaves() -> None:
    quota = TargetQuota("a", ProviderLimits(rpm=2))
    quota.dispatch(100.2)
    quota.dispatch(130.0)
    assert quota.retry_after_s(131.0) == pytest.approx(161.0 - 131.0)
    assert TargetQuota("b", ProviderLimits(rpm=1)).retry_after_s(5.0) == 1.0  # nothing counted: at least 1 s


def test_fresh_shared_totals_plus_unreported_counts_decide_and_stale_ones_fall_back_to_the_own_window() -> None:
    quota = TargetQuota("a", ProviderLimits(rpm=5))
    quota.sharing = True
    quota.dispatch(10.0)
    reported = quota.take_pending()
    assert reported == {10: [1, 0]}
    quota.adopt_shared(4, 0, 30.0, now=10.1)  # three more from other processes, this one's included
    assert quota.blocked(10.2, shared_ttl_s=1.0) is None  # 4 < 5
    assert quota.dispatch(10.2, shared_ttl_s=1.0) is None  # unreported: 4 + 1
    assert quota.blocked(10.3, shared_ttl_s=1.0) == AT_RPM
    # The shared report is 2 s old, older than the 1 s it is trusted for: this process's own window (2) decides.
    assert quota.blocked(12.2, shared_ttl_s=1.0) is None
    assert quota.counts(12.2, shared_ttl_s=1.0) == (2, 0)


def test_counts_on_their_way_to_the_store_still_count_and_return_when_the_report_fails() -> None:
    quota = TargetQuota("a", ProviderLimits(rpm=2))
    quota.sharing = True
    quota.adopt_shared(0, 0, None, now=1.0)
    quota.dispatch(1.1, shared_ttl_s=5.0)
    quota.dispatch(1.2, shared_ttl_s=5.0)
    taken = quota.take_pending()
    assert taken == {1: [2, 0]}
    assert quota.blocked(1.3, shared_ttl_s=5.0) == AT_RPM  # being reported, still counted
    quota.report_failed(1.4)
    assert quota.take_pending() == {1: [2, 0]}  # the next report carries them


def test_the_registry_keeps_counts_across_a_limit_change_and_drops_targets_without_limits() -> None:
    registry = QuotaRegistry()
    registry.configure({"a": ProviderLimits(rpm=1), "b": ProviderLimits()})
    assert len(registry) == 1
    assert registry.dispatch("a", 1.0) is None
    assert registry.dispatch("b", 1.0) is None  # no limits: never counted, never blocked
    registry.configure({"a": ProviderLimits(rpm=2)})
    assert registry.blocked("a", 1.5) is None  # raised to 2: one spent, one left
    assert registry.dispatch("a", 1.5) is None
    assert registry.blocked("a", 1.6) == AT_RPM


@pytest.mark.parametrize("limits", [{"rpm": 0}, {"tpm": -1}])
def test_a_limit_below_one_is_refused(limits: dict[str, int]) -> None:
    with pytest.raises(ValueError, match="rpm and tpm"):
        ProviderLimits(**limits)


def test_without_a_shared_store_nothing_is_kept_for_reports() -> None:
    registry = QuotaRegistry()  # no shared store: shared_ttl_s is 0
    registry.configure({"a": ProviderLimits(rpm=100)})
    for second in range(1000):
        registry.dispatch("a", float(second))
    quota = registry.get("a")
    assert quota is not None
    assert quota.take_pending() == {}  # bounded memory: nothing accumulates that nobody would send
    assert quota.counts(999.5) == (61, 0)  # the last 61 seconds, one request each


def test_a_report_that_failed_long_ago_no_longer_counts() -> None:
    quota = TargetQuota("a", ProviderLimits(rpm=3))
    quota.sharing = True
    quota.adopt_shared(0, 0, None, now=0.0)
    quota.dispatch(0.5, shared_ttl_s=5.0)
    quota.take_pending()
    quota.report_failed(100.0)  # the outage outlasted the window
    assert quota.take_pending() == {}
    quota.adopt_shared(0, 0, None, now=100.0)
    assert quota.counts(100.1, shared_ttl_s=5.0) == (0, 0)
