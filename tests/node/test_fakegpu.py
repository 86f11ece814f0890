"""FakeGpuBackend: spec parsing, YAML files, errors that name the field, programmable events."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from vgpu.adapters.fakegpu import FakeGpuBackend, FakeGpuSpecError, fake_uuid, parse_spec
from vgpu.adapters.gpu import GpuBackendError
from vgpu.node.model import GpuStats, ProcessUsage, XidEvent


def test_spec_with_counts_and_mixed_models() -> None:
    inv = parse_spec("2xT4,1xA10", seed="n1")
    assert [g.model for g in inv.gpus] == ["Tesla T4", "Tesla T4", "NVIDIA A10"]
    assert [g.index for g in inv.gpus] == [0, 1, 2]
    assert [g.memory_mib for g in inv.gpus] == [15360, 15360, 23028]
    assert inv.gpus[2].uuid == fake_uuid("n1", 2)
    assert inv.gpus[0].compute_capability == (7, 5)


def test_uuids_are_deterministic_per_seed() -> None:
    assert parse_spec("2xT4", seed="a") == parse_spec("2xT4", seed="a")
    assert parse_spec("2xT4", seed="a").gpus[0].uuid != parse_spec("2xT4", seed="b").gpus[0].uuid


def test_sxm_gpus_of_one_term_are_nvlinked() -> None:
    inv = parse_spec("4xA100-SXM4-80GB")
    first = inv.gpus[0]
    assert set(first.nvlink_peers) == {g.uuid for g in inv.gpus[1:]}
    assert parse_spec("2xT4").gpus[0].nvlink_peers == ()


def test_custom_model_with_memory_and_numa_spread() -> None:
    inv = parse_spec("4xMyGPU:20480", numa_nodes=2)
    assert inv.gpus[0].model == "MyGPU"
    assert inv.gpus[0].memory_mib == 20480
    assert [g.numa_node for g in inv.gpus] == [0, 0, 1, 1]


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ("4xB9000", "unknown GPU model 'B9000'; use one of A100-SXM4-80GB"),
        ("2xT4,,1xA10", "spec term 2"),
        ("0xT4", "GPU count must be >= 1"),
        ("1xFoo:0", "memory must be a positive number of MiB"),
        ("x", "unknown GPU model"),
        ("4x", "unknown GPU model '4x'"),
        ("2xT4 junk!", "expected COUNTxMODEL[:MEMORY_MIB]"),
    ],
    ids=["unknown-model", "empty-term", "zero-count", "zero-memory", "bare-x", "no-model", "junk"],
)
def test_spec_errors_name_the_term(spec: str, fragment: str) -> None:
    with pytest.raises(FakeGpuSpecError) as err:
        parse_spec(spec)
    assert fragment in str(err.value)


def test_yaml_file(tmp_path: Path) -> None:
    path = tmp_path / "gpus.yaml"
    path.write_text(
        "driverVersion: '535.1.2'\ncudaVersion: '12.2'\ngpus:\n"
        "  - {model: A100-SXM4-40GB, numa: 1, nvlink: [1], uuid: GPU-a}\n"
        "  - {model: Custom, memoryMiB: 1024, nvlink: [GPU-a]}\n"
    )
    inv = FakeGpuBackend.from_spec(str(path)).inventory()
    assert inv.driver_version == "535.1.2"
    assert inv.gpus[0].numa_node == 1
    assert inv.gpus[0].nvlink_peers == (inv.gpus[1].uuid,)
    assert inv.gpus[1].nvlink_peers == ("GPU-a",)
    assert inv.gpus[1].memory_mib == 1024


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ("gpus: 3", "gpus: expected a list"),
        ("- {memoryMiB: 3}", "gpus[0].model: required"),
        ("- {model: Nope}", "gpus[0].model: unknown GPU model 'Nope'"),
        ("- {model: X, memoryMiB: -1}", "gpus[0].memoryMiB: must be a positive integer"),
        ("- {model: T4, numa: -2}", "gpus[0].numa: must be a NUMA node number"),
        ("- {model: T4, nvlink: [5]}", "gpus[0].nvlink: 5 is not another GPU"),
        ("- {model: T4, uuid: a}\n- {model: T4, uuid: a}", "UUIDs must be unique"),
    ],
)
def test_yaml_errors_name_the_field(tmp_path: Path, body: str, fragment: str) -> None:
    path = tmp_path / "gpus.yml"
    path.write_text(body)
    with pytest.raises(FakeGpuSpecError) as err:
        FakeGpuBackend.from_spec(str(path))
    assert fragment in str(err.value)


def test_injected_xid_wakes_a_waiter() -> None:
    backend = FakeGpuBackend(parse_spec("1xT4"))
    uuid = backend.inventory().gpus[0].uuid
    got: list[list[XidEvent]] = []
    waiter = threading.Thread(target=lambda: got.append(backend.wait_xid(5.0)))
    waiter.start()
    backend.inject_xid(79, uuid)
    waiter.join(5.0)
    assert got == [[XidEvent(xid=79, gpu_uuid=uuid)]]
    assert backend.wait_xid(0.01) == []


def test_failure_and_usage_are_programmable() -> None:
    backend = FakeGpuBackend(parse_spec("1xT4"))
    usage = [ProcessUsage(backend.inventory().gpus[0].uuid, 42, 1 << 20)]
    backend.set_process_usage(usage)
    assert backend.process_usage() == usage
    backend.set_failure("GPU is lost")
    with pytest.raises(GpuBackendError, match="GPU is lost"):
        backend.wait_xid(1.0)
    backend.set_failure(None)
    assert backend.wait_xid(0.0) == []


def test_processes_start_grow_and_end_and_gpu_stats_follow() -> None:
    backend = FakeGpuBackend(parse_spec("2xT4"))
    g0, g1 = (g.uuid for g in backend.inventory().gpus)
    backend.set_process(g0, 10, 1 << 30)
    backend.set_process(g0, 11, 1 << 29)
    backend.set_process(g1, 10, None)  # the driver can't tell: counts as 0
    backend.set_process(g0, 10, 3 << 30)  # grows
    assert sorted(backend.process_usage(), key=lambda u: (u.gpu_uuid == g1, u.pid)) == [
        ProcessUsage(g0, 10, 3 << 30),
        ProcessUsage(g0, 11, 1 << 29),
        ProcessUsage(g1, 10, None),
    ]
    backend.set_utilization(g0, 0.25)
    assert backend.gpu_stats() == [
        GpuStats(g0, (3 << 30) + (1 << 29), 0.25),
        GpuStats(g1, 0, 0.0),
    ]
    backend.end_process(10)
    backend.set_memory_used(g1, 123)
    backend.set_utilization(g1, None)
    assert backend.process_usage() == [ProcessUsage(g0, 11, 1 << 29)]
    assert backend.gpu_stats() == [GpuStats(g0, 1 << 29, 0.25), GpuStats(g1, 123, None)]


def test_usage_controls_name_bad_input() -> None:
    backend = FakeGpuBackend(parse_spec("1xT4"))
    with pytest.raises(FakeGpuSpecError, match="gpu_uuid: 'GPU-nope' is not one of"):
        backend.set_process("GPU-nope", 1, 0)
    with pytest.raises(FakeGpuSpecError, match=r"utilization: must be within 0\.\.1"):
        backend.set_utilization(backend.inventory().gpus[0].uuid, 55.0)
