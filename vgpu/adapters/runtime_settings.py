"""Reading what the node's runtime settings are, for `vgpu.node.runtime_check`: the CDI device
names of the spec files in the runtime's spec directories, and the NVIDIA runtime's config.toml.

Only what is mounted into the agent's pod can be read (the chart mounts `/etc/cdi`,
`/var/run/cdi` and `/etc/nvidia-container-runtime` read-only). A file that cannot be read or
parsed is skipped: it cannot name a device the runtime would resolve either (the runtime refuses
a broken spec too). Specs are JSON or YAML (`.json`, `.yaml`, `.yml`), as the CDI specification
allows; the NVIDIA Container Toolkit writes YAML.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

_SUFFIXES = {".json", ".yaml", ".yml"}
_MAX_SPEC_BYTES = 16 << 20  # a spec listing every driver file is a few hundred KiB


def cdi_device_names(dirs: Iterable[Path]) -> frozenset[str] | None:
    """`<kind>=<name>` of every device in the readable specs; None when no directory is."""
    names: set[str] = set()
    readable = False
    for directory in dirs:
        try:
            files = sorted(p for p in directory.iterdir() if p.suffix in _SUFFIXES)
        except OSError:
            continue
        readable = True
        for path in files:
            names |= _spec_names(path)
    return frozenset(names) if readable else None


def _spec_names(path: Path) -> set[str]:
    try:
        with path.open("rb") as f:
            text = f.read(_MAX_SPEC_BYTES + 1)
        if len(text) > _MAX_SPEC_BYTES:
            return set()
        spec = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (OSError, ValueError, yaml.YAMLError):
        return set()
    if not isinstance(spec, Mapping) or not isinstance(spec.get("kind"), str):
        return set()
    devices = spec.get("devices")
    if not isinstance(devices, list):
        return set()
    return {
        f"{spec['kind']}={d['name']}"
        for d in devices
        if isinstance(d, Mapping) and isinstance(d.get("name"), str)
    }


def toolkit_config(path: Path) -> Mapping[str, Any] | None:
    """The NVIDIA runtime's parsed config.toml; None when it cannot be read or parsed."""
    try:
        with path.open("rb") as f:
            return tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError):
        return None
