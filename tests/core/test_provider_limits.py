"""Provider-side rpm/tpm windows: counted at dispatch with token reservations, settled from usage, 61 buckets."""

from __future__ import annotations

import pytest

from routing.core.provider_limits import (
    AT_RPM,
    AT_TPM,
    DEFAULT_OUTPUT_RESERVATION,
    TPM_REFUSAL_HINT_S,
    ProviderLimits,
    QuotaRefusal,
    QuotaRegistry,
    QuotaTicket,
    TargetQuota,
    choices_of,
    estimated_usage,
    reservation,
)


def admitted(verdict: QuotaTicket | QuotaRefusal | None) -> QuotaTicket:
    assert isinstance(verdict, QuotaTicket), verdict
    return verdict


def test_it_admits_rpm_requests_then_refuses_without_counting_the_refusal() -> None:
    quota = TargetQuota("a", ProviderLimits(rpm=3))
    verdicts = [quota.dispatch(100.0 + i * 0.1) for i in range(4)]
    assert [type(v) for v in verdicts] == [QuotaTicket, QuotaTicket, QuotaTicket, QuotaRefusal]
    refusal = verdicts[3]
    assert isinstance(refusal, QuotaRefusal)
    assert refusal.reason == AT_RPM
    assert quota.counts(100.5) == (3, 0)  # the refused request was not counted


def test_a_request_leaves_the_window_60_to_61_seconds_after_it_was_sent_never_earlier() -> None:
    quota = TargetQuota("a", ProviderLimits(rpm=1))
    admitted(quota.dispatch(100.9))
    assert quota.blocked(160.8) == AT_RPM  # 59.9 s later: still in the window
    assert quota.blocked(160.95) == AT_RPM  # 60.05 s later: the whole second 100 still counts
    assert quota.blocked(161.0) is None  # second 100 has left


def test_an_attempt_reserves_its_tokens_so_a_burst_cannot_overshoot_the_tpm() -> None:
    quota = TargetQuota("a", ProviderLimits(tpm=1000))
    admitted(quota.dispatch(10.0, reserve=600))
    refusal = quota.dispatch(10.1, reserve=600)  # 600 in flight + 600 > 1000, though nothing was used yet
    assert isinstance(refusal, QuotaRefusal)
    assert refusal.reason == AT_TPM
    admitted(quota.dispatch(10.2, reserve=400))  # 600 + 400 fits exactly
    assert quota.counts(10.3) == (2, 1000)


def test_a_settlement_replaces_the_reservation_with_the_real_usage() -> None:
    quota = TargetQuota("a", ProviderLimits(tpm=1000))
    ticket = admitted(quota.dispatch(10.0, reserve=800))
    quota.settle(ticket, 120, 10.5)
    assert quota.counts(10.6) == (1, 120)
    admitted(quota.dispatch(10.7, reserve=800))  # the 680 returned make room
    more = admitted(quota.dispatch(11.0, reserve=50))
    quota.settle(more, 400, 11.2)  # used more than it reserved: the overshoot counts
    assert quota.counts(11.3) == (3, 120 + 800 + 400)


def test_a_settlement_after_its_second_left_the_window_counts_only_the_shortfall_now() -> None:
    quota = TargetQuota("a", ProviderLimits(tpm=10_000))
    short = admitted(quota.dispatch(10.0, reserve=100))
    long = admitted(quota.dispatch(10.0, reserve=100))
    quota.settle(short, 30, 80.0)  # its second has left: nothing to return
    quota.settle(long, 350, 80.0)  # 250 more than reserved count at 80 s
    assert quota.counts(80.5) == (0, 250)


def test_a_release_takes_back_the_request_and_its_reservation() -> None:
    quota = TargetQuota("a", ProviderLimits(rpm=1, tpm=100))
    ticket = admitted(quota.dispatch(5.0, reserve=80))
    quota.release(ticket, 5.1)
    assert quota.counts(5.2) == (0, 0)
    assert quota.blocked(5.2) is None
    assert quota.retry_after_s(5.2) == 1.0  # nothing left in the window to wait for


def test_a_request_larger_than_the_whole_tpm_goes_out_alone_into_an_empty_minute() -> None:
    quota = TargetQuota("a", ProviderLimits(tpm=100))
    ticket = admitted(quota.dispatch(1.0, reserve=5000))
    assert ticket.reserved == 100  # capped at the minute
    assert isinstance(quota.dispatch(1.1, reserve=1), QuotaRefusal)


def test_it_says_when_the_oldest_count_leaves() -> None:
    quota = TargetQuota("a", ProviderLimits(rpm=2))
    quota.dispatch(100.2)
    quota.dispatch(130.0)
    assert quota.retry_after_s(131.0) == pytest.approx(161.0 - 131.0)
    refusal = quota.dispatch(131.0)
    assert isinstance(refusal, QuotaRefusal)
    assert refusal.retry_after_s == pytest.approx(30.0)
    assert TargetQuota("b", ProviderLimits(rpm=1)).retry_after_s(5.0) == 1.0  # nothing counted: at least 1 s


@pytest.mark.parametrize(("reason", "wait", "held"), [(AT_RPM, 30.0, 30.0), (AT_TPM, 30.0, TPM_REFUSAL_HINT_S)])
def test_a_shared_refusal_holds_for_planning_while_it_can_still_be_true(reason: str, wait: float,
                                                                         held: float) -> None:
    quota = TargetQuota("a", ProviderLimits(rpm=5, tpm=1000))
    quota.mark_full(QuotaRefusal(reason, wait), now=10.0)  # type: ignore[arg-type]
    assert quota.blocked(10.0 + held - 0.01, shared=True) == reason
    assert quota.retry_after_s(10.0 + held - 0.01, shared=True) >= 1.0
    assert quota.blocked(10.0 + held - 0.01, shared=False) is None  # this process's own window has room
    assert quota.blocked(10.0 + held, shared=True) is None


def test_reservation_is_the_input_once_and_the_output_for_each_choice() -> None:
    assert reservation(input_tokens=100, max_output_tokens=50) == 150
    assert reservation(input_tokens=100, max_output_tokens=50, choices=3) == 250
    assert reservation(input_tokens=100, max_output_tokens=None) == 100 + DEFAULT_OUTPUT_RESERVATION
    assert reservation(input_tokens=7, max_output_tokens=0) == 7  # embeddings produce no output


@pytest.mark.parametrize(("value", "choices"), [(None, 1), (3, 3), (0, 1), (-2, 1), ("4", 1), (True, 1), (2.0, 1)])
def test_choices_counts_only_a_positive_integer_n(value: object, choices: int) -> None:
    assert choices_of(value) == choices


def test_a_cut_stream_is_estimated_from_its_input_and_the_output_received() -> None:
    assert estimated_usage(input_tokens=40, output_chars=9) == 43  # 9 characters: 3 tokens, rounded up


def test_the_registry_keeps_counts_across_a_limit_change_and_drops_targets_without_limits() -> None:
    registry = QuotaRegistry()
    registry.configure({"a": ProviderLimits(rpm=1), "b": ProviderLimits()})
    assert len(registry) == 1
    admitted(registry.dispatch("a", 1.0))
    assert registry.dispatch("b", 1.0) is None  # no limits: never counted, never blocked
    registry.configure({"a": ProviderLimits(rpm=2)})
    assert registry.blocked("a", 1.5) is None  # raised to 2: one spent, one left
    admitted(registry.dispatch("a", 1.5))
    assert registry.blocked("a", 1.6) == AT_RPM


@pytest.mark.parametrize("limits", [{"rpm": 0}, {"tpm": -1}])
def test_a_limit_below_one_is_refused(limits: dict[str, int]) -> None:
    with pytest.raises(ValueError, match="rpm and tpm"):
        ProviderLimits(**limits)


def test_memory_stays_bounded_whatever_the_history() -> None:
    registry = QuotaRegistry()
    registry.configure({"a": ProviderLimits(rpm=100, tpm=10**9)})
    for second in range(1000):
        ticket = admitted(registry.dispatch("a", float(second), reserve=10))
        registry.settle(ticket, 5, second + 0.5)
    assert registry.get("a").counts(999.5) == (61, 61 * 5)  # type: ignore[union-attr]
    assert len(registry.get("a")._tokens._counts) <= 61  # type: ignore[union-attr]
