"""The queued replay's inputs: flags parsed or refused in one line, the stable split of the trace
between queues, and Poisson arrivals whose load is what the flag says."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vgpu.cli.main import main
from vgpu.cli.trace_files import read_lifetimes, read_trace
from vgpu.core.errors import InvalidRequest
from vgpu.sim.poisson import bucket, generate, is_large, split
from vgpu.sim.queues.settings import build, parse_duration
from vgpu.sim.trace import Trace


@pytest.fixture(scope="module")
def trace() -> Trace:
    return read_trace()


def test_durations_read_in_seconds_minutes_hours_and_days() -> None:
    assert [parse_duration("--x", t) for t in ("90", "90s", "10m", "1.5h", "1d")] == [
        90,
        90,
        600,
        5400,
        86400,
    ]


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["--queues", "A=x"], "--queues"),
        (["--queues", "A"], "--queues"),
        (["--queues", "A=1,A=2"], "--queues"),
        (["--queues", "A=1", "--queue-start", "C=1h"], "--queue-start"),
        (["--queues", "A=1,B=3", "--strict", "B=forever"], "--strict"),
        (["--queues", "A=1,B=3", "--strict", "B=2d"], "--strict"),
        (["--queues", "A=1,B=3", "--queue-large", "C"], "--queue-large"),
        (["--queues", "A=1,B=3", "--load", "0"], "--load"),
        (["--queues", "A=1,B=3", "--seeds", "1-2"], "--queues"),
        # a start past the week --measure allows made the replay run for ever (ticks of 10 s)
        (["--queues", "A=1,B=3", "--queue-start", "B=100000d"], "--queue-start"),
        (["--queues", "A=1,B=3", "--queue-start", "B=" + "9" * 400], "--queue-start"),
        (["--queues", "A=1,B=3", "--max-duration", "9" * 400], "--max-duration"),
        (["--queues", "A=1,B=3", "--min-runtime", "9" * 400], "--min-runtime"),
    ],
)
def test_a_malformed_queue_flag_is_refused_in_one_line_naming_it(
    argv: list[str], flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["simulate", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and flag in err[0] and "Traceback" not in err[0]


def test_the_split_is_sha256_of_the_pod_name_not_pythons_salted_hash() -> None:
    digest = hashlib.sha256(b"openb-pod-0001").digest()
    assert bucket("openb-pod-0001", 4) == int.from_bytes(digest[:8], "big") % 4
    # pinned: another hash, or Python's per-process salted hash(), would move them
    assert [bucket(f"openb-pod-{i:04d}", 3) for i in range(10)] == [1, 1, 2, 2, 1, 2, 0, 0, 2, 2]


def test_each_gpu_pod_goes_to_exactly_one_queue_and_the_large_queue_gets_whole_gpus(
    trace: Trace,
) -> None:
    parts = split(trace.pods, ("A", "B"), None)
    gpu_pods = {p.key for p in trace.pods if p.wants_gpu}
    assert sorted(k for ps in parts.values() for k in (p.key for p in ps)) == sorted(gpu_pods)
    assert 0.45 < len(parts["A"]) / len(gpu_pods) < 0.55  # the hash spreads evenly
    large = split(trace.pods, ("A", "B"), "A")
    assert all(is_large(p) for p in large["A"]) and not any(is_large(p) for p in large["B"])


@settings(max_examples=5, deadline=None)
@given(st.sampled_from([0.5, 1.0, 1.5]), st.integers(0, 10_000))
def test_arrivals_carry_the_load_asked_for(load: float, seed: int) -> None:
    trace = read_trace()
    setup = build(
        "A=1,B=3", starts=["B=1h"], stricts=[], load=load, measure="10h", max_duration="1h"
    )
    lifetimes = read_lifetimes()
    arrivals = generate(setup, trace.pods, lifetimes, cluster_cores=10_000, seed=seed)
    for queue, start in (("A", 0.0), ("B", 3600.0)):
        mine = [a for a in arrivals if a.queue == queue]
        assert min(a.at for a in mine) >= start
        asked = sum(a.cores * a.duration for a in mine) / ((setup.end_s - start) * 10_000)
        assert abs(asked - load) < 0.15 * load, (queue, asked)
        assert all(1 <= a.duration <= 3600 for a in mine)


def test_arrivals_are_the_same_for_the_same_seed_and_differ_for_another(
    trace: Trace,
) -> None:
    setup = build("A=1,B=3", starts=[], stricts=[], measure="1h")
    lifetimes = read_lifetimes()

    def keys(seed: int) -> list[tuple[float, str]]:
        out = generate(setup, trace.pods, lifetimes, cluster_cores=5_000, seed=seed)
        return [(a.at, a.pod.key) for a in out]

    assert keys(7) == keys(7) != keys(8)


def test_a_pod_list_without_lifetimes_is_refused_naming_the_columns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pods = tmp_path / "pods.csv"
    pods.write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,1000,1024,1,500\n")
    assert main(["simulate", "--pods", str(pods), "--queues", "A=1"]) == 2
    err = capsys.readouterr().err
    assert "creation_time" in err and len(err.strip().splitlines()) == 1


def test_invalid_request_names_the_flag() -> None:
    with pytest.raises(InvalidRequest, match="--measure"):
        build("A=1", starts=[], stricts=[], measure="0s")
