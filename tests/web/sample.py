"""Snapshots for the web view's tests: the demo cluster, a hostile one, and queues."""

from __future__ import annotations

import json

from tests.inspect.builders import Obj, node, pod
from tests.inspect.scenario import unschedulable
from vgpu.inspect.snapshot import Snapshot

HOSTILE = "<script>alert(1)<img src=x onerror=alert(2)>"
A100 = ("A100-SXM4-80GB", 81920)
GATE = [{"name": "vgpu.io/queue"}]


def hostile_cluster() -> Snapshot:
    """A pod, a container, a model and a scheduler message carrying markup: a page must show
    them as text (the API server refuses such pod names, a saved snapshot does not)."""
    pods = (
        pod(
            f"default/{HOSTILE}",
            node="n1",
            asks={HOSTILE: (30, 0)},
            shares={HOSTILE: [(0, 30, 8192)]},
        ),
        unschedulable(
            pod(f"ml/{HOSTILE}-w", asks={"main": (100, 0)}, phase="Pending"),
            f"0/1 nodes are available: {HOSTILE}",
        ),
    )
    return Snapshot((node("n1", [(HOSTILE, 15360), A100]),), pods, (), "2025-01-01T12:00:00Z")


def queued(key: str, queue: str, cores: int, *, held: bool, on: int | None = None) -> Obj:
    """A pod of `queue`; `on`: the GPU index of node n1 it is bound to and holds."""
    shares = None if on is None else {"main": [(on, cores, 81920 * cores // 100)]}
    obj = pod(key, asks={"main": (cores, 0)}, labels={"vgpu.io/queue": queue},
              node="n1" if on is not None else "", shares=shares,
              phase="Running" if on is not None else "Pending")  # fmt: skip
    if held:
        obj["spec"]["schedulingGates"] = list(GATE)
    return obj


def queue_cluster() -> tuple[Snapshot, str]:
    """Two queues, one holding a GPU and a half, the other with four held pods."""
    pods = (
        queued("qa/a1", "qa", 100, held=False, on=0),
        queued("qa/a2", "qa", 50, held=False, on=1),
        *(queued(f"qb/b{i}", "qb", 50, held=True) for i in range(4)),
    )
    config = {"queues": [{"name": q, "weight": w, "namespaces": [q]} for q, w in
                         (("qa", 1), ("qb", 3))]}  # fmt: skip
    return Snapshot((node("n1", [A100] * 4),), pods, (), ""), json.dumps(config)
