"""Golden files for every view of the demo cluster (tests/inspect/scenario.py).

Regenerate after an intended change with `UPDATE_GOLDEN=1 pytest tests/inspect/test_golden.py`
and review the diff.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.inspect.scenario import SNAPSHOT_HEADER, demo_cluster, wide_cluster
from vgpu.inspect.build import build_report
from vgpu.inspect.cli import render
from vgpu.inspect.snapshot import Snapshot, dumps, loads

HERE = Path(__file__).parent
GOLDEN = HERE / "golden"
CLUSTER_FILE = HERE.parents[1] / "examples" / "cluster-snapshot.yaml"
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"


def check(path: Path, actual: str) -> None:
    if UPDATE:
        path.write_text(actual, encoding="utf-8")
    assert path.exists(), f"{path} missing; run with UPDATE_GOLDEN=1"
    assert actual == path.read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("name", "nodes", "output", "details"),
    [
        ("table.txt", (), "table", False),
        ("details.txt", (), "table", True),
        ("report.json", (), "json", False),
        ("report.yaml", (), "yaml", False),
        ("table-gpu-a.txt", ("gpu-a",), "table", False),
        ("details-gpu-c-missing.txt", ("gpu-c", "gpu-z"), "table", True),
        ("table-cpu-only.txt", ("cpu-1",), "table", False),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_views_match_golden_files(
    name: str, nodes: tuple[str, ...], output: str, details: bool
) -> None:
    report = build_report(demo_cluster(), nodes)
    check(GOLDEN / name, render(report, output=output, details=details))


@pytest.mark.parametrize("width", [None, 160, 120, 100, 80, 60])
@pytest.mark.parametrize("cluster", [demo_cluster, wide_cluster], ids=["demo", "wide"])
def test_table_fits_the_width(cluster: Callable[[], Snapshot], width: int | None) -> None:
    """Each width has its golden file; the node table fits in it whenever a layout can."""
    text = render(build_report(cluster()), width=width)
    name = "demo" if cluster is demo_cluster else "wide"
    check(GOLDEN / f"table-{name}-{width or 'full'}.txt", text)
    table = text.split("\n\n")[0].splitlines()
    if width is not None and width >= 80:
        assert max(len(line) for line in table) <= width, text


def test_wide_nodes_overflow_without_condensing() -> None:
    """The full layout of 8-GPU nodes is far wider than a terminal: condensing is needed."""
    full = render(build_report(wide_cluster()))
    assert max(len(line) for line in full.splitlines()) > 160


def test_saved_cluster_file_is_the_demo_cluster() -> None:
    """examples/cluster-snapshot.yaml (the README's --fake-cluster example) stays in step with
    scenario.py."""
    check(CLUSTER_FILE, SNAPSHOT_HEADER + dumps(demo_cluster()))


def test_saved_cluster_renders_like_the_live_objects() -> None:
    loaded = loads(CLUSTER_FILE.read_text(encoding="utf-8"))
    assert render(build_report(loaded), details=True) == render(
        build_report(demo_cluster()), details=True
    )
