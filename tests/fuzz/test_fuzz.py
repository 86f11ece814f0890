"""A short fuzzing run of every target in the normal suite: coverage-guided with atheris when it
is installed (the `test` extra on Linux), else random and seed-mutated bytes with hypothesis.
Longer runs: `python -m tests.fuzz.run TARGET -max_total_time=SECONDS` (docs/performance.md, "Fuzzing")."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fuzz.targets import SEEDS, TARGETS

ROOT = Path(__file__).resolve().parents[2]
RUNS = 3000


@pytest.mark.skipif(importlib.util.find_spec("atheris") is None, reason="atheris not installed")
@pytest.mark.parametrize("target", sorted(TARGETS))
def test_a_short_coverage_guided_run_finds_nothing(target: str, tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "tests.fuzz.run", target, f"-runs={RUNS}", "-max_total_time=60"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "DONE" in result.stderr


def _mutated(seeds: list[bytes]) -> st.SearchStrategy[bytes]:
    def splice(seed: bytes, at: int, junk: bytes, cut: int) -> bytes:
        at %= len(seed) + 1
        return seed[:at] + junk + seed[at + cut :]

    return st.one_of(
        st.binary(max_size=300),
        st.builds(
            splice,
            st.sampled_from(seeds),
            st.integers(0, 400),
            st.binary(max_size=20),
            st.integers(0, 8),
        ),
    )


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_the_fallback_fuzzer_finds_nothing(target: str) -> None:
    for seed in SEEDS[target]:  # each target asserts its own properties (tests/fuzz/targets.py)
        TARGETS[target](seed)
    ran: list[bytes] = []

    @settings(max_examples=300, deadline=None)
    @given(_mutated(SEEDS[target]))
    def run(data: bytes) -> None:
        TARGETS[target](data)
        ran.append(data)

    run()
    assert len(ran) >= 100, f"only {len(ran)} inputs reached {target}"
