"""What a `vgpu simulate --json` document records about its own run: the `inputs` object.

A figure is only worth keeping if it can be rerun: the flags as given, the seeds expanded, each
policy with every knob it ran with (this version's defaults included, since defaults move), the
trace files with their sha256 (a file renamed or edited is caught), and the vgpu version. Both the
placement replay and the queued replay build their `inputs` here, so the two documents agree;
the files' records (`trace_file`) are made where the files are read, `vgpu.cli.trace_files`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path

from vgpu.core.policy.knobs import DefaultConfig
from vgpu.core.policy.specs import PolicySpec

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
        "queue_memory",
        "measure",
        "min_runtime",
        "max_duration",
        "cluster_nodes",
        "policy",
        "seeds",
    ]
)
"""The flags (argparse names) a queued replay's figures depend on."""


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
    trace: Mapping[str, Mapping[str, object]],
    version: str,
) -> dict[str, object]:
    """The `inputs` object: `flags` (the run's flags by their argparse names, as given), the
    seeds expanded, the policies parsed, the trace files (`nodes`, `pods`: each its file, whether
    embedded, and its sha256) and the vgpu version."""
    return {
        "vgpu_version": version,
        "flags": {name: _plain(flags[name]) for name in sorted(flags)},
        "seeds": list(seeds),
        "policies": [policy_entry(p) for p in policies],
        "trace": {"nodes": dict(trace["nodes"]), "pods": dict(trace["pods"])},
    }
