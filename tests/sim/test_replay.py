import importlib.util
import json
from pathlib import Path

import pytest

from vgpu.cli.main import main
from vgpu.cli.trace_files import read_trace
from vgpu.core.policy.specs import make_policy
from vgpu.core.workload import workload_from
from vgpu.sim.engine import capacity_milli, replay
from vgpu.sim.workload import arrivals


@pytest.fixture(scope="module")
def slice_trace(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The first 60 openb nodes and 600 pods: a small, real slice of the embedded trace."""
    from vgpu.cli.trace_files import embedded
    from vgpu.sim.trace import DEFAULT_NODES, DEFAULT_PODS

    root = tmp_path_factory.mktemp("slice")
    nodes, pods = root / "nodes.csv", root / "pods.csv"
    nodes.write_text("".join(embedded(DEFAULT_NODES).read_text().splitlines(True)[:61]))
    pods.write_text("".join(embedded(DEFAULT_PODS).read_text().splitlines(True)[:601]))
    return nodes, pods


def test_arrivals_reach_the_tune_target_and_are_seeded() -> None:
    trace = read_trace()
    cap = capacity_milli(trace.nodes)
    seq = arrivals(trace.pods, capacity_milli=cap, tune=1.3, seed=42)
    total = sum(p.gpu_milli for p in seq)
    assert 1.29 * cap < total <= 1.3 * cap + 8000
    assert len({p.key for p in seq}) == len(seq)
    assert seq[:8152] != sorted(trace.pods, key=lambda p: p.key)
    again = arrivals(trace.pods, capacity_milli=cap, tune=1.3, seed=42)
    assert [p.key for p in again] == [p.key for p in seq]
    other = arrivals(trace.pods, capacity_milli=cap, tune=1.3, seed=43)
    assert [p.key for p in other] != [p.key for p in seq]


def test_replay_on_a_slice_is_deterministic_and_fgd_beats_random(
    slice_trace: tuple[Path, Path],
) -> None:
    trace = read_trace(*slice_trace)
    seq = arrivals(trace.pods, capacity_milli=capacity_milli(trace.nodes), tune=1.3, seed=42)
    results = {}
    for name in ("random", "fgd", "default"):
        first = replay(trace.nodes, seq, make_policy(name, workload_from(trace.pods)), seed=42)
        second = replay(trace.nodes, seq, make_policy(name, workload_from(trace.pods)), seed=42)
        assert first.as_json() | {"seconds": 0} == second.as_json() | {"seconds": 0}
        assert first.pods_placed + first.pods_failed == len(seq)
        assert first.alloc_pct_at_100 is not None and 0 < first.alloc_pct_at_100 <= 100
        results[name] = first.alloc_pct_at_100
    assert results["fgd"] > results["random"]


def test_cli_json_has_the_documented_shape(
    slice_trace: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    nodes, pods = slice_trace
    code = main(
        [
            "simulate",
            "--nodes",
            str(nodes),
            "--pods",
            str(pods),
            "--policy",
            "bestfit",
            "--policy",
            "fgd",
            "--seeds",
            "1-2",
            "--jobs",
            "1",
            "--json",
            "--quiet",
        ]
    )
    assert code == 0
    doc = json.loads(capsys.readouterr().out)
    assert set(doc["policies"]) == {"bestfit", "fgd"}
    entry = doc["policies"]["fgd"]
    assert isinstance(entry["median_alloc_pct_at_100"], float)
    assert [r["seed"] for r in entry["runs"]] == [1, 2]
    assert set(entry["runs"][0]) == {
        "seed",
        "alloc_pct_at_100",
        "alloc_pct_final",
        "pods_placed",
        "pods_failed",
        "seconds",
    }


def test_cli_table_and_plot(
    slice_trace: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nodes, pods = slice_trace
    png = tmp_path / "alloc.png"
    code = main(
        [
            "simulate",
            "--nodes",
            str(nodes),
            "--pods",
            str(pods),
            "--policy",
            "fgd",
            "--jobs",
            "1",
            "--plot",
            str(png),
        ]
    )
    out = capsys.readouterr()
    if importlib.util.find_spec("matplotlib") is None:  # the plain install: one clear line
        assert code == 2 and "needs matplotlib" in out.err and not png.exists()
        return
    assert code == 0
    assert "fgd" in out.out and "alloc@100%" in out.out and "95.23" in out.out
    assert "1 run(s)" in out.err
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--policy", "tetris"], "--policy: unknown policy 'tetris'"),
        (["--policy", "default:speed=11"], "--policy: bad default-policy option 'speed=11'"),
        (["--seeds", "9-1"], "--seeds"),
        (["--pods", "/nonexistent/pods.csv"], "cannot open"),
        (["--tune", "0"], "--tune"),
    ],
)
def test_cli_bad_input_is_one_clear_line(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["simulate", "--quiet", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err
    assert "Traceback" not in err and len(err.splitlines()) == 1
