"""The per-connection token buckets: over any sequence of takes, no more is granted than the
burst plus the rate times the time elapsed, and a spent bucket refills. The flow-control credit
a client owes: what it returns for free is never more than what was sent, in at most one free
update per `CREDIT_MIN` bytes sent plus one per send, and a client returning each send's bytes
in Go's 4 KiB pieces is never charged."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from vgpu.extender.server.http2_budgets import CREDIT_MIN, Bucket, Credit, Http2Caps, Rate


@given(
    burst=st.integers(1, 50),
    rate=st.floats(0.0, 100.0),
    gaps=st.lists(st.floats(0.0, 0.5), max_size=300),
)
def test_a_bucket_grants_at_most_its_burst_plus_its_rate(
    burst: int, rate: float, gaps: list[float]
) -> None:
    bucket, now, granted = Bucket(Rate(burst, rate)), 0.0, 0
    for gap in gaps:
        now += gap
        granted += bucket.take(now)
    assert granted <= burst + rate * now + 1e-6


def test_a_spent_bucket_refills_at_its_rate() -> None:
    bucket = Bucket(Rate(2, 10.0))
    assert bucket.take(0.0) and bucket.take(0.0) and not bucket.take(0.0)
    assert not bucket.take(0.05) and bucket.take(0.2)


@given(st.lists(st.tuples(st.booleans(), st.integers(1, 20_000)), max_size=300))
def test_free_window_updates_return_at_most_what_was_sent_in_few_pieces(
    steps: list[tuple[bool, int]],
) -> None:
    credit, sent, sends, returned, free = Credit(), 0, 0, 0, 0
    for is_send, n in steps:
        if is_send:
            credit.sent(n)
            sent, sends = sent + n, sends + 1
        elif credit.returned(n):
            returned, free = returned + n, free + 1
    assert returned <= sent
    assert free <= sent // CREDIT_MIN + sends


@given(st.lists(st.integers(0, 50_000), max_size=100))
def test_credit_returned_as_go_returns_it_is_always_due(replies: list[int]) -> None:
    """x/net http2 flow.go `inflow.add`: an update once 4 KiB read are unsent."""
    credit, unsent = Credit(), 0
    for size in replies:
        credit.sent(size)
        for offset in range(0, size, 512):  # json.Decoder's reads
            unsent += min(512, size - offset)
            if unsent >= 4096:
                assert credit.returned(unsent)
                unsent = 0


def test_the_default_streams_budget_carries_kube_scheduler_at_full_speed() -> None:
    """kube-scheduler makes up to three extender calls per pod (filter, prioritize, bind) and
    schedules a few hundred pods a second on a quiet host: 500 pods/s for 10 s, one stream
    each 1/1500 s, must never be refused."""
    bucket, step = Bucket(Http2Caps().streams), 1 / 1500
    assert all(bucket.take(i * step) for i in range(15_000))
