"""`vgpu simulate` speaks to someone who has not read the FGD paper: a legend under the table,
"n/a" where a figure does not exist, what it replays and what it wrote, and a plot that stands
alone. Bad output paths are refused before any replay runs."""

from __future__ import annotations

import importlib.util
import io
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vgpu.cli.main import main
from vgpu.cli.plots import plot
from vgpu.sim import runner
from vgpu.sim.engine import RunResult
from vgpu.sim.report import plot_labels, table


@pytest.fixture(scope="module")
def tiny_trace(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The first 20 openb nodes and 200 pods."""
    from vgpu.cli.trace_files import embedded
    from vgpu.sim.trace import DEFAULT_NODES, DEFAULT_PODS

    root = tmp_path_factory.mktemp("tiny")
    nodes, pods = root / "nodes.csv", root / "pods.csv"
    nodes.write_text("".join(embedded(DEFAULT_NODES).read_text().splitlines(True)[:21]))
    pods.write_text("".join(embedded(DEFAULT_PODS).read_text().splitlines(True)[:201]))
    return nodes, pods


needs_matplotlib = pytest.mark.skipif(
    importlib.util.find_spec("matplotlib") is None,
    reason="the plot extra is not installed (CI's plain-install step)",
)


def simulate(trace: tuple[Path, Path], *argv: str) -> list[str]:
    return ["simulate", "--nodes", str(trace[0]), "--pods", str(trace[1]), "--jobs", "1", *argv]


def result(policy: str, at_100: float | None, seed: int = 42) -> RunResult:
    return RunResult(policy, seed, at_100, 90.0, 100, 30, 1.0, [(50.0, 50.0), (100.0, 90.0)])


def test_table_has_a_legend_and_na_where_no_figure_exists() -> None:
    text = table([result("default", 93.0), result("fgd", 94.0)])
    lines = text.splitlines()
    default_row = next(line for line in lines if line.startswith("default"))
    assert default_row.split()[-1] == "n/a"  # the paper has no figure for our policy
    for column in ("alloc@100%", "final", "placed", "failed", "s/run", "paper@100%"):
        assert any(line.lstrip().startswith(column) for line in lines[3:]), column


def test_tune_below_one_has_no_figure_at_100(
    tiny_trace: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    few = tmp_path / "few.csv"  # 10 pods on 20 nodes: arrivals stop far below 100 %
    few.write_text("".join(tiny_trace[1].read_text().splitlines(True)[:11]))
    argv = simulate((tiny_trace[0], few), "--policy", "bestfit", "--tune", "0.5", "--quiet")
    assert main(argv) == 0
    row = next(r for r in capsys.readouterr().out.splitlines() if r.startswith("bestfit"))
    assert row.split()[1] == "n/a"


@needs_matplotlib
def test_says_what_it_replays_and_what_it_wrote(
    tiny_trace: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    png = tmp_path / "alloc.png"
    assert main(simulate(tiny_trace, "--policy", "fgd", "--plot", str(png))) == 0
    err = capsys.readouterr().err
    assert "200 pods" in err and "arrivals per run" in err
    assert f"wrote {png}" in err
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("where", ["missing/alloc.png", "file/alloc.png", "alloc.txtx"])
def test_plot_path_refused_before_any_replay(
    where: str,
    tiny_trace: tuple[Path, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    (tmp_path / "file").write_text("")

    def no_replays(*_a: object, **_k: object) -> list[RunResult]:
        raise AssertionError("replays ran before the output path was checked")

    monkeypatch.setattr(runner, "run_all", no_replays)
    monkeypatch.setattr("vgpu.cli.simulate.run_all", no_replays)
    assert main(simulate(tiny_trace, "--plot", str(tmp_path / where))) == 2
    err = capsys.readouterr().err
    assert "--plot" in err and "Traceback" not in err


def test_plot_labels_carry_trace_seeds_and_figures() -> None:
    results = [result("fgd", 95.5, 1), result("fgd", 94.5, 2), result("random", None, 1)]
    title, labels = plot_labels(results, trace="openb default")
    assert "openb default" in title and "median of 2 seeds (1-2)" in title
    assert labels == {"fgd": "fgd: 95.00 % at 100 %", "random": "random: n/a at 100 %"}


def test_plot_title_of_one_seed_names_it_and_claims_no_median() -> None:
    title, _ = plot_labels([result("fgd", 95.0, 42), result("bestfit", 93.0, 42)], trace="t")
    assert title.endswith("t, seed 42") and "median" not in title


def test_table_of_one_seed_claims_no_median() -> None:
    assert "\nseed 7; GPU allocation" in table([result("fgd", 95.0, 7)])
    assert "\nmedian of 3 seeds (1-2, 5);" in table([result("fgd", 9.0, s) for s in (1, 2, 5)])


@given(st.sets(st.integers(0, 60), min_size=1, max_size=12))
def test_plot_title_says_median_exactly_when_seeds_are_many(seeds: set[int]) -> None:
    title, _ = plot_labels([result("fgd", 95.0, s) for s in seeds], trace="t")
    assert ("median" in title) == (len(seeds) > 1)
    listed = title.rsplit("(", 1)[-1].rstrip(")") if len(seeds) > 1 else title.split("seed ")[-1]
    assert f"of {len(seeds)} seeds" in title or len(seeds) == 1
    assert expand(listed) == seeds


def expand(listed: str) -> set[int]:
    """The seeds a title's "1, 5, 9-11" names."""
    out: set[int] = set()
    for part in listed.split(", "):
        lo, _, hi = part.partition("-")
        out |= set(range(int(lo), int(hi or lo) + 1))
    return out


@needs_matplotlib
def test_plot_draws_the_100_percent_arrival_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from matplotlib.axes import Axes
    from matplotlib.lines import Line2D

    drawn: dict[str, object] = {}
    original = Axes.axvline

    def spy(self: Axes, x: float = 0, ymin: float = 0, ymax: float = 1, **kwargs: Any) -> Line2D:
        drawn["x"] = x
        return original(self, x, ymin, ymax, **kwargs)

    monkeypatch.setattr(Axes, "axvline", spy)
    plot([result("fgd", 95.0)], str(tmp_path / "p.png"), trace="openb default")
    assert drawn["x"] == 100


def test_json_and_progress_say_none_not_zero() -> None:
    import io

    runs = [result("bestfit", None)]
    assert runner.summary(runs)["bestfit"]["median_alloc_pct_at_100"] is None
    out = io.StringIO()
    runner.progress_printer(out)(runs[0], 1, 1)
    assert "n/a allocated at 100 % arrival" in out.getvalue()


def test_a_closed_pipe_ends_quietly(
    tiny_trace: tuple[Path, Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`vgpu simulate --json | head -1` closes stdout early: exit 141 (as SIGPIPE would end a
    C tool), no traceback."""

    class ClosedPipe(io.StringIO):
        def write(self, text: str) -> int:
            raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(sys, "stdout", ClosedPipe())
    assert main(simulate(tiny_trace, "--policy", "fgd", "--seeds", "42", "--json")) == 141
    assert "Traceback" not in capsys.readouterr().err


def test_a_queued_replay_shows_its_progress_unless_quiet(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The default `--queues` run took 4 to 12 CPU minutes with nothing on the terminal."""
    argv = ["simulate", "--queues", "A=1,B=3", "--measure", "10m", "--cluster-nodes", "4"]
    assert main([*argv, "--seeds", "7"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("queues: replaying 10 simulated minutes on 4 nodes")
    steps = [line for line in err if line.startswith("  simulated ")]
    assert len(steps) == 10 and steps[-1].startswith("  simulated 10 of 10 min (100 %)")
    assert main([*argv, "--seeds", "7", "--quiet"]) == 0
    assert capsys.readouterr().err == ""
