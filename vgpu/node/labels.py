"""GFD-style node labels describing a node's GPUs, and the minimal patch to apply them.

Labels (all under `<domain>/`, values are strings):

| key | value |
|---|---|
| `gpu.count` | number of GPUs |
| `gpu.product`, `gpu.memory` (MiB), `gpu.family`, `gpu.compute.major/minor` | of GPU 0 |
| `gpu.mixed` | `"true"` when the node has more than one GPU model |
| `gpu.product.<product>` | number of GPUs of that model (one label per model) |
| `cuda.driver.major/minor`, `cuda.runtime.major/minor` | driver and CUDA versions |
| `gpu.memory-backend` | `driver` (the driver's per-cgroup limits), else the `--mode` (docs/isolation.md) |

On a homogeneous node the single-valued labels describe every GPU, as with GFD. On a mixed node
they describe GPU 0 only; select by `gpu.product.<product>` (exists / count) instead, or read the
`gpu-inventory` annotation. Product names are sanitised like GFD (`[A-Za-z0-9-_.]`, spaces to
`-`), e.g. "NVIDIA A100-SXM4-80GB" → `NVIDIA-A100-SXM4-80GB`. Pure: no I/O.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping

from vgpu.node.devices import DEFAULT_DOMAIN
from vgpu.node.model import GpuInfo, GpuInventory

_MAX_LABEL = 63
_FAMILY_BY_NAME = (
    (re.compile(r"\b(GB?200|B100|B200|RTX PRO 6000)"), "blackwell"),
    (re.compile(r"\b(GH200|H100|H200|H800|H20)\b"), "hopper"),
    (re.compile(r"\b(L4|L40S?|L20|RTX [0-9]+ Ada|RTX 40[0-9]0)\b"), "ada-lovelace"),
    (re.compile(r"\b(A100|A800|A30|A40|A10G?|A16|A2|RTX A[0-9]+|RTX 30[0-9]0)\b"), "ampere"),
    (re.compile(r"\b(T4|T4G|Quadro RTX|RTX 20[0-9]0|TITAN RTX)\b"), "turing"),
    (re.compile(r"\b(V100|TITAN V)\b"), "volta"),
    (re.compile(r"\b(P100|P40|P4|P6)\b"), "pascal"),
)


def sanitize(value: str) -> str:
    """A valid label value (or key name part): `[A-Za-z0-9-_.]`, alnum at both ends, <= 63 chars."""
    cleaned = re.sub(r"[^A-Za-z0-9_.-]", "", value.strip().replace(" ", "-"))
    return cleaned[:_MAX_LABEL].strip("-_.")


def gpu_family(gpu: GpuInfo) -> str:
    """Architecture family from the compute capability, else from the model name."""
    if gpu.compute_capability is not None:
        major, minor = gpu.compute_capability
        by_cc = _family_by_cc(major, minor)
        if by_cc is not None:
            return by_cc
    for pattern, family in _FAMILY_BY_NAME:
        if pattern.search(gpu.model):
            return family
    return "unknown"


def _family_by_cc(major: int, minor: int) -> str | None:
    if major == 8:
        return "ada-lovelace" if minor == 9 else "ampere"
    if major == 7:
        return "turing" if minor >= 5 else "volta"
    return {6: "pascal", 9: "hopper", 10: "blackwell", 12: "blackwell", 13: "rubin"}.get(major)


def node_labels(
    inventory: GpuInventory, *, domain: str = DEFAULT_DOMAIN, memory_backend: str = ""
) -> dict[str, str]:
    """The full desired label set for a node with these GPUs (and its memory backend, once
    the agent chose it)."""
    gpus = sorted(inventory.gpus, key=lambda g: g.index)
    labels = {f"{domain}/gpu.count": str(len(gpus))}
    if memory_backend:
        labels[f"{domain}/gpu.memory-backend"] = memory_backend
    labels.update(_version_labels(f"{domain}/cuda.driver", inventory.driver_version))
    labels.update(_version_labels(f"{domain}/cuda.runtime", inventory.cuda_version))
    if not gpus:
        return labels
    first = gpus[0]
    products = Counter(sanitize(g.model) for g in gpus)
    labels[f"{domain}/gpu.product"] = sanitize(first.model)
    labels[f"{domain}/gpu.memory"] = str(first.memory_mib)
    labels[f"{domain}/gpu.family"] = gpu_family(first)
    labels[f"{domain}/gpu.mixed"] = "true" if len(products) > 1 else "false"
    if first.compute_capability is not None:
        labels[f"{domain}/gpu.compute.major"] = str(first.compute_capability[0])
        labels[f"{domain}/gpu.compute.minor"] = str(first.compute_capability[1])
    for product, count in sorted(products.items()):
        labels[f"{domain}/{sanitize('gpu.product.' + product)}"] = str(count)
    return labels


def _version_labels(prefix: str, version: str) -> dict[str, str]:
    parts = version.split(".")
    labels = {}
    for suffix, part in zip(("major", "minor"), parts, strict=False):
        if part.isdigit():
            labels[f"{prefix}.{suffix}"] = str(int(part))
    return labels


def managed(key: str, *, domain: str = DEFAULT_DOMAIN) -> bool:
    """Whether this module owns the label `key` (and may delete it)."""
    return key.startswith((f"{domain}/gpu.", f"{domain}/cuda."))


def label_patch(
    current: Mapping[str, str], desired: Mapping[str, str], *, domain: str = DEFAULT_DOMAIN
) -> dict[str, str | None]:
    """Changes turning `current` into `desired` for managed keys; None deletes a key.

    An empty result means no patch is needed. Labels outside our prefixes are never touched.
    """
    patch: dict[str, str | None] = {
        k: v for k, v in desired.items() if managed(k, domain=domain) and current.get(k) != v
    }
    for key in current:
        if managed(key, domain=domain) and key not in desired:
            patch[key] = None
    return patch
