"""The daemons' retry backoff: exponential from the first failure, capped, jittered, reset."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vgpu.adapters.backoff import Backoff


@given(base=st.floats(0.01, 5), cap=st.floats(5, 60), seed=st.integers(0, 100))
def test_delays_double_up_to_the_cap_with_jitter(base: float, cap: float, seed: int) -> None:
    backoff = Backoff(base, cap, rng=random.Random(seed).random)
    for n in range(40):
        ceiling = min(cap, base * 2**n)
        assert ceiling / 2 <= backoff.next_delay() <= ceiling
    backoff.reset()
    assert backoff.next_delay() <= base


def test_bad_bounds_are_refused() -> None:
    with pytest.raises(ValueError, match="0 < base <= cap"):
        Backoff(0, 1)
    with pytest.raises(ValueError, match="0 < base <= cap"):
        Backoff(2, 1)
