"""Node labels: homogeneous and mixed nodes, family detection, minimal patches."""

from __future__ import annotations

import pytest

from vgpu.adapters.fakegpu import parse_spec
from vgpu.node.labels import gpu_family, label_patch, node_labels, sanitize
from vgpu.node.model import GpuInfo, GpuInventory


def test_homogeneous_node() -> None:
    labels = node_labels(parse_spec("4xA100-SXM4-80GB"))
    assert labels == {
        "vgpu.io/gpu.count": "4",
        "vgpu.io/gpu.product": "NVIDIA-A100-SXM4-80GB",
        "vgpu.io/gpu.memory": "81920",
        "vgpu.io/gpu.family": "ampere",
        "vgpu.io/gpu.mixed": "false",
        "vgpu.io/gpu.compute.major": "8",
        "vgpu.io/gpu.compute.minor": "0",
        "vgpu.io/gpu.product.NVIDIA-A100-SXM4-80GB": "4",
        "vgpu.io/cuda.driver.major": "550",
        "vgpu.io/cuda.driver.minor": "54",
        "vgpu.io/cuda.runtime.major": "12",
        "vgpu.io/cuda.runtime.minor": "4",
    }


def test_mixed_node_has_per_product_counts() -> None:
    labels = node_labels(parse_spec("2xT4,1xA10"), domain="example.com")
    assert labels["example.com/gpu.product"] == "Tesla-T4"
    assert labels["example.com/gpu.mixed"] == "true"
    assert labels["example.com/gpu.product.Tesla-T4"] == "2"
    assert labels["example.com/gpu.product.NVIDIA-A10"] == "1"
    assert labels["example.com/gpu.family"] == "turing"


def test_node_without_gpus() -> None:
    labels = node_labels(GpuInventory((), "", ""))
    assert labels == {"vgpu.io/gpu.count": "0"}


@pytest.mark.parametrize(
    ("model", "cc", "family"),
    [
        ("NVIDIA H100 80GB HBM3", None, "hopper"),
        ("Tesla V100-SXM2-16GB", None, "volta"),
        ("Tesla T4", None, "turing"),
        ("NVIDIA A10", None, "ampere"),
        ("NVIDIA L40S", None, "ada-lovelace"),
        ("NVIDIA B200", None, "blackwell"),
        ("Mystery", None, "unknown"),
        ("Mystery", (8, 9), "ada-lovelace"),
        ("Mystery", (7, 5), "turing"),
        ("Mystery", (9, 0), "hopper"),
    ],
)
def test_family(model: str, cc: tuple[int, int] | None, family: str) -> None:
    assert gpu_family(GpuInfo("GPU-x", 0, model, 1, compute_capability=cc)) == family


def test_sanitize() -> None:
    assert sanitize(" NVIDIA A100 80GB PCIe ") == "NVIDIA-A100-80GB-PCIe"
    assert sanitize("a(b)/c") == "abc"
    assert len(sanitize("x" * 100)) == 63


def test_patch_only_when_changed_and_never_foreign_labels() -> None:
    desired = node_labels(parse_spec("2xT4"))
    current = {**desired, "kubernetes.io/hostname": "n1", "vgpu.io/other": "x"}
    assert label_patch(current, desired) == {}
    current["vgpu.io/gpu.count"] = "3"
    current["vgpu.io/gpu.product.NVIDIA-A10"] = "1"
    assert label_patch(current, desired) == {
        "vgpu.io/gpu.count": "2",
        "vgpu.io/gpu.product.NVIDIA-A10": None,
    }
