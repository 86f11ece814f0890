"""Random pods for the hand-off's stateful test and soak: shares with different memory asks and
cores limits, whole GPUs, init containers (regular and sidecar) and gangs."""

from __future__ import annotations

import random
from typing import Any

from tests.pods import container as pod_container
from tests.pods import pod_obj
from vgpu.api.podspec import VGPU_SCHEDULER

CORES, MEMORY = "vgpu.io/cores", "vgpu.io/memory"
SHARES = (10, 20, 25, 30, 40, 50, 60, 75)
GPU_BLOCKS = 15  # a T4 (15360 MiB) in 1 GiB blocks


def container(name: str, cores: int, blocks: int = 0, *, sidecar: bool = False) -> dict[str, Any]:
    extra: dict[str, Any] = {"restartPolicy": "Always"} if sidecar else {}
    return pod_container(name, cores=cores, memory=blocks or None, image="x", **extra)


def pod(name: str, containers: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    """A pod of the scheduler the extender serves, as the chart's admission policy makes every
    vGPU pod (a gang's members are its pods of that scheduler: `vgpu.extender.pods.book`)."""
    init = extra.pop("init", [])
    annotations = extra.pop("annotations", {})
    extra.setdefault("scheduler", VGPU_SCHEDULER)
    return pod_obj(name, containers, annotations=annotations, init=init, **extra)


def share(rng: random.Random, name: str) -> dict[str, Any]:
    cores = rng.choice(SHARES)
    blocks = rng.choice([0, 0, max(1, GPU_BLOCKS * cores // 100), rng.randint(1, 6)])
    return container(name, cores, blocks)


def random_pod(rng: random.Random, name: str) -> dict[str, Any]:
    """One pod of a random kind (gang members are made by `gang`)."""
    kind = rng.choices(["share", "whole", "init", "sidecar", "two"], [50, 15, 15, 10, 10])[0]
    annotations = {}
    if rng.random() < 0.15:
        annotations["vgpu.io/cores-limit"] = "100"
    if kind == "share":
        return pod(name, [share(rng, "main")], annotations=annotations)
    if kind == "whole":
        return pod(name, [container("main", rng.choice([100, 100, 200]))])
    if kind == "two":
        return pod(name, [share(rng, "a"), share(rng, "b")], annotations=annotations)
    init = [share(rng, "init")]
    if kind == "sidecar":
        init.append(container("side", rng.choice([10, 20]), sidecar=True))
    return pod(name, [share(rng, "main")], init=init, annotations=annotations)


def gang(rng: random.Random, name: str, size: int) -> list[dict[str, Any]]:
    """Equal members (whole GPU or a share), sometimes each with an init container."""
    cores = rng.choice([100, 50, 30])
    init = [container("init", rng.choice([10, cores]))] if rng.random() < 0.3 else []
    notes = {"vgpu.io/gang-name": name, "vgpu.io/gang-size": str(size)}
    return [
        pod(f"{name}-{i}", [container("main", cores)], init=list(init), annotations=dict(notes))
        for i in range(size)
    ]
