"""`vgpu simulate --json` records what it ran on, so a figure in docs/results can be rerun and
checked: the flags, the seeds, every policy knob, the trace files' sha256 and the vgpu version;
the same `inputs` object in the placement and the queued modes, and every field documented."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vgpu import __version__
from vgpu.cli.main import main
from vgpu.cli.trace_files import embedded, trace_files
from vgpu.core.policy.knobs import DefaultConfig
from vgpu.core.policy.specs import parse_policy
from vgpu.sim.run_inputs import policy_entry, run_inputs
from vgpu.sim.trace import DEFAULT_NODES, DEFAULT_PODS

ROOT = Path(__file__).resolve().parents[2]
INPUT_KEYS = {"vgpu_version", "flags", "seeds", "policies", "trace"}


@pytest.fixture(scope="module")
def tiny_trace(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The first 20 openb nodes and 200 pods."""
    root = tmp_path_factory.mktemp("tiny")
    nodes, pods = root / "nodes.csv", root / "pods.csv"
    nodes.write_text("".join(embedded(DEFAULT_NODES).read_text().splitlines(True)[:21]))
    pods.write_text("".join(embedded(DEFAULT_PODS).read_text().splitlines(True)[:201]))
    return nodes, pods


def simulate_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, object]:
    assert main(["simulate", "--jobs", "1", "--quiet", "--json", *argv]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert isinstance(doc, dict)
    return doc


def test_placement_json_records_flags_seeds_policies_trace_and_version(
    tiny_trace: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    nodes, pods = tiny_trace
    argv = ["--nodes", str(nodes), "--pods", str(pods), "--seeds", "3-4", "--tune", "1.1"]
    doc = simulate_json(capsys, *argv, "--policy", "fgd", "--policy", "default:cpu_weight=0")
    inputs = doc["inputs"]
    assert isinstance(inputs, dict) and set(inputs) == INPUT_KEYS
    assert inputs["vgpu_version"] == __version__
    assert inputs["seeds"] == [3, 4]
    flags = inputs["flags"]
    assert flags["seeds"] == "3-4" and flags["tune"] == 1.1 and flags["ties"] == "policy"
    assert flags["policy"] == ["fgd", "default:cpu_weight=0"]
    assert not {"jobs", "json", "quiet", "plot", "queues", "load"} & set(flags)
    fgd, default = inputs["policies"]
    assert fgd == {"name": "fgd", "base": "fgd", "knobs": None}
    assert default["knobs"]["cpu_weight"] == 0.0 and default["knobs"]["reserve_lo"] == 0.25
    for name, path in (("nodes", nodes), ("pods", pods)):
        recorded = inputs["trace"][name]
        assert recorded["file"] == str(path) and recorded["embedded"] is False
        assert recorded["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert set(doc) == {"inputs", "policies"}
    assert fields(doc) - documented() == set()


def test_an_edited_trace_file_gets_another_sha256(tmp_path: Path) -> None:
    pods = tmp_path / "pods.csv"
    pods.write_text(embedded(DEFAULT_PODS).read_text()[:5000])
    before = run_inputs({}, seeds=[1], policies=[], trace=trace_files(None, pods), version="x")
    pods.write_text(pods.read_text().replace(",", ";", 1))
    after = run_inputs({}, seeds=[1], policies=[], trace=trace_files(None, pods), version="x")
    assert before["trace"] != after["trace"]


def test_the_embedded_trace_is_named_not_located() -> None:
    """Its place on disk is the install's, not the run's: a document must not carry it."""
    trace = run_inputs({}, seeds=[42], policies=[], trace=trace_files(None, None), version="x")[
        "trace"
    ]
    assert isinstance(trace, dict)
    assert trace["pods"]["file"] == DEFAULT_PODS and trace["pods"]["embedded"] is True
    assert "/" not in trace["nodes"]["file"] and len(trace["nodes"]["sha256"]) == 64


@given(
    cpu_weight=st.floats(0, 4, allow_nan=False),
    tie=st.sampled_from(["order", "packed"]),
    typed=st.booleans(),
)
def test_recorded_knobs_rebuild_the_policy_that_ran(
    cpu_weight: float, tie: str, typed: bool
) -> None:
    spec = parse_policy(f"default:cpu_weight={cpu_weight!r},tie={tie},typed={int(typed)}")
    knobs = json.loads(json.dumps(policy_entry(spec)))["knobs"]
    assert DefaultConfig(**knobs) == spec.config


def test_queued_json_records_the_same_inputs(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--queues", "A=1,B=3", "--measure", "10m", "--cluster-nodes", "4", "--seeds", "7"]
    doc = simulate_json(capsys, *argv)
    assert fields(doc) - documented() == set()
    inputs = doc["inputs"]
    assert isinstance(inputs, dict) and set(inputs) == INPUT_KEYS
    assert inputs["seeds"] == [7] and inputs["flags"]["queues"] == "A=1,B=3"
    assert inputs["policies"][0]["name"] == "default"
    assert inputs["trace"]["pods"]["file"] == DEFAULT_PODS
    assert not {"tune", "variant", "jobs"} & set(inputs["flags"])


def documented() -> set[str]:
    """The fields docs/performance.md's tables of the `--json` document name."""
    text = (ROOT / "docs" / "performance.md").read_text()
    section = text[text.index("### The `--json` document") :]
    section = section[: section.index("\n## ")]
    return set(re.findall(r"^\| `([\w.\[\]]+)` \|", section, re.MULTILINE))


def fields(value: object, path: str = "", *, named: bool = False) -> set[str]:
    """Every field's dotted path, a list's items as `[]` and `policies`' names as `NAME`
    (a field of the items, not a field itself); below `STOP` the documentation lists the keys
    in prose."""
    found = {path} if named else set()
    if path in STOP:
        return found
    if isinstance(value, dict):
        for key, child in value.items():
            name = "NAME" if path == "policies" else key
            found |= fields(child, f"{path}.{name}" if path else name, named=name != "NAME")
    elif isinstance(value, list):
        for child in value:
            found |= fields(child, f"{path}[]")
    return found


STOP = {"inputs.flags", "inputs.policies[].knobs", "inputs.trace.pods", "queues", "series"}
