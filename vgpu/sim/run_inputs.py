"""What a `vgpu simulate --json` document records about its own run: the `inputs` object.

A figure is only worth keeping if it can be rerun: the flags as given, the seeds expanded, each
policy with every knob it ran with (this version's defaults included, since defaults move), the
trace files with their sha256 (a file renamed or edited is caught), and the vgpu version. Both the
placement replay and the queued replay build their `inputs` here, so the two documents agree.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path

from vgpu.core.policy_default_knobs import DefaultConfig
from vgpu.core.policy_specs import PolicySpec
from vgpu.sim.trace import DEFAULT_NODES, DEFAULT_PODS, embedded

PLACEMENT_INPUTS = frozenset(
    [
        "nodes",
        "pods",
        "policy",
        "seeds",
        "tune",
        "ties",
        "variant",
        "prior",
        "gang_mode",
        "device_choice",
    ]
)
"""The flags (argparse names) a placement replay's figures depend on: not --jobs, --plot, --json
or --quiet, which change how it runs or prints, never what it finds."""

QUEUE_INPUTS = frozenset(
    [
        "nodes",
        "pods",
        "queues",
        "queue_start",
        "load",
        "reclaim",
        "strict",
        "fcfs",
        "queue_large",
        "measure",
        "min_runtime",
        "max_duration",
        "cluster_nodes",
        "policy",
        "seeds",
    ]
)
"""The flags (argparse names) a queued replay's figures depend on."""


def sha256(path: Path) -> str:
    """The file's sha256 in hex, read in chunks (a pod list runs to megabytes)."""
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def trace_file(given: Path | None, default: str) -> dict[str, object]:
    """One trace file: the path as given (or the embedded file's name), and its sha256.

    The embedded file is named, not located: its place on disk depends on the install.
    """
    path = given if given is not None else embedded(default)
    return {
        "file": str(given) if given is not None else default,
        "embedded": given is None,
        "sha256": sha256(path),
    }


def policy_entry(spec: PolicySpec) -> dict[str, object]:
    """A policy as run: its text, its base, and for `default` every knob's value."""
    knobs = None
    if spec.base == "default":
        knobs = asdict(spec.config or DefaultConfig())
    return {"name": spec.name, "base": spec.base, "knobs": knobs}


def _plain(value: object) -> object:
    """A flag's value as JSON holds it: paths as text, everything else as argparse left it."""
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def run_inputs(
    flags: Mapping[str, object],
    *,
    seeds: Sequence[int],
    policies: Sequence[PolicySpec],
    nodes: Path | None,
    pods: Path | None,
    version: str,
) -> dict[str, object]:
    """The `inputs` object: `flags` (the run's flags by their argparse names, as given), the
    seeds expanded, the policies parsed, the trace files hashed and the vgpu version."""
    return {
        "vgpu_version": version,
        "flags": {name: _plain(flags[name]) for name in sorted(flags)},
        "seeds": list(seeds),
        "policies": [policy_entry(p) for p in policies],
        "trace": {
            "nodes": trace_file(nodes, DEFAULT_NODES),
            "pods": trace_file(pods, DEFAULT_PODS),
        },
    }
