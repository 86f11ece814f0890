"""The flags choosing where a daemon's GPUs come from, shared by `vgpu node-agent` and `vgpu
dra-driver`: NVML on a GPU node, or fake GPUs from a spec or an inventory file (tests, demos,
benchmarks). Bad values raise `ConfigError` naming the flag and the fix.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from vgpu.core.errors import ConfigError

if TYPE_CHECKING:
    from vgpu.adapters.gpu import GpuBackend

FAKE_GPUS_EXAMPLE = "4xA100-SXM4-80GB or 2xT4,1xL4"


def add_gpu_flags(p: argparse.ArgumentParser) -> None:
    """The flags choosing the GPU backend (`gpu_backend`)."""
    gpus = p.add_mutually_exclusive_group()
    gpus.add_argument(
        "--fake-gpus",
        metavar="SPEC",
        help=f"fake GPUs instead of NVML, e.g. {FAKE_GPUS_EXAMPLE} (COUNTxMODEL,...; "
        "MODEL:MEMORY_MIB for a model not built in)",
    )
    gpus.add_argument(
        "--fake-gpus-file", metavar="YAML", type=Path, help="fake GPUs from an inventory file"
    )


def gpu_backend(args: argparse.Namespace) -> GpuBackend:
    """Fake GPUs from --fake-gpus or --fake-gpus-file, else the node's own through NVML."""
    from vgpu.adapters.fakegpu import FakeGpuBackend, FakeGpuSpecError, load_inventory_file
    from vgpu.adapters.gpu import GpuBackendUnavailable, NvmlBackend

    if args.fake_gpus is not None:
        if not args.fake_gpus.strip():
            raise ConfigError(
                f"--fake-gpus: empty; give GPUs, e.g. {FAKE_GPUS_EXAMPLE}, or drop the flag to "
                "use the node's real GPUs through NVML"
            )
        try:
            return FakeGpuBackend.from_spec(args.fake_gpus, seed=args.node_name)
        except FakeGpuSpecError as e:
            raise ConfigError(f"--fake-gpus: {e}") from e
    if args.fake_gpus_file:
        return FakeGpuBackend(load_inventory_file(args.fake_gpus_file, seed=args.node_name))
    try:
        return NvmlBackend()
    except GpuBackendUnavailable as e:
        raise ConfigError(
            f"cannot read this node's GPUs: {e}; on a machine without an NVIDIA driver, "
            f"run with fake GPUs, e.g. --fake-gpus {FAKE_GPUS_EXAMPLE.split()[0]}"
        ) from e
