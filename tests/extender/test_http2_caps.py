"""The per-connection token buckets: over any sequence of takes, no more is granted than the
burst plus the rate times the time elapsed, and a spent bucket refills."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from vgpu.extender.http2caps import Bucket, Rate


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
