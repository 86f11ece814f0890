"""hack/gpuspec_variants.py: the type-constrained variants are exact, nested and reproducible."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from vgpu.cli.trace_files import read_trace
from vgpu.sim.trace import DEFAULT_NODES

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def gen() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "gpuspec_variants", REPO / "hack/gpuspec_variants.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def written(gen: ModuleType, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("spec")
    gen.main(["--out", str(out), "--fractions", "10,33", "--seed", "7"])
    return out


def _specs(path: Path) -> dict[str, str]:
    from csv import DictReader

    with path.open() as handle:
        return {r["name"]: r["gpu_spec"] for r in DictReader(handle)}


def test_the_fraction_of_gpu_pods_constrained_is_exact_and_cpu_only_pods_never_are(
    written: Path,
) -> None:
    for pct in (10, 33):
        trace = read_trace(None, written / f"openb_pod_list_spec{pct}.csv")
        gpu = [p for p in trace.pods if p.wants_gpu]
        typed = [p for p in gpu if not p.selector.is_any]
        assert len(typed) == round(len(gpu) * pct / 100)
        assert all(p.selector.is_any for p in trace.pods if not p.wants_gpu)


def test_variants_nest_and_every_constraint_leaves_a_node_that_could_host_the_pod(
    written: Path, gen: ModuleType
) -> None:
    ten, third = (
        _specs(written / "openb_pod_list_spec10.csv"),
        _specs(written / "openb_pod_list_spec33.csv"),
    )
    assert all(third[name] == spec for name, spec in ten.items() if spec)
    _, rows = gen.read_csv(written / "openb_pod_list_spec33.csv")
    nodes = gen.node_caps(gen.embedded(DEFAULT_NODES))
    assert all(gen.hostable(r, r["gpu_spec"], nodes) for r in rows if r["gpu_spec"])


def test_same_seed_same_files_other_seed_other_pods(
    written: Path, gen: ModuleType, tmp_path: Path
) -> None:
    gen.main(["--out", str(tmp_path), "--fractions", "10", "--seed", "7"])
    name = "openb_pod_list_spec10.csv"
    assert (tmp_path / name).read_bytes() == (written / name).read_bytes()
    gen.main(["--out", str(tmp_path), "--fractions", "10", "--seed", "8"])
    assert _specs(tmp_path / name) != _specs(written / name)


def test_constraints_follow_the_pod_class(written: Path, gen: ModuleType) -> None:
    _, rows = gen.read_csv(written / "openb_pod_list_spec33.csv")
    for row in rows:
        if row["gpu_spec"]:
            assert row["gpu_spec"] in gen.MIX[gen.pod_class(row)]
