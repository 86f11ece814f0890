"""The reclaim tests' own GPU model: nodes of GPUs with 100 cores each, running pods on one GPU
each or on several whole ones (`span`), and a waiting pod that asks either some cores of one GPU
or whole GPUs of one node (what kube-scheduler and the device plugin allow a single pod: every
GPU it gets is on the node it binds to).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hypothesis import strategies as st

from vgpu.core.queues.proportion import ZERO, Vec, add
from vgpu.core.queues.reclaim import Running


@dataclass(frozen=True)
class Pod:
    key: str
    queue: str
    node: str
    gpu: int
    cores: int
    started: float
    span: int = 1
    """GPUs held, from `gpu` on: a pod of more than one holds each of them whole."""

    @property
    def on(self) -> range:
        return range(self.gpu, self.gpu + self.span)


@dataclass(frozen=True)
class Cluster:
    """GPUs per node (100 cores each) and the pods on them."""

    gpus: dict[str, int]
    pods: tuple[Pod, ...]

    def free(self, gone: Sequence[Running] = ()) -> dict[tuple[str, int], int]:
        left = {(n, g): 100 for n, count in self.gpus.items() for g in range(count)}
        keys = {r.key for r in gone}
        for p in self.pods:
            if p.key not in keys:
                for gpu in p.on:
                    left[(p.node, gpu)] -= p.cores // p.span
        return left

    def fits(self, cores: int, gone: Sequence[Running]) -> bool:
        """A pod asking `cores` (a part of one GPU, or whole GPUs in hundreds) fits somewhere."""
        left = self.free(gone)
        if cores <= 100:
            return any(f >= cores for f in left.values())
        whole = cores // 100
        return any(
            sum(1 for (m, _), f in left.items() if m == node and f == 100) >= whole
            for node in self.gpus
        )

    def node_free(self, node: str) -> Vec:
        return (sum(f for (n, _), f in self.free().items() if n == node), 0)

    def running(self, with_gpus: bool = False) -> list[Running]:
        """The pods as reclaim sees them, with the GPU each holds or without."""
        return [
            Running(p.key, p.queue, (p.cores, 0), p.started, p.node, self._gpus(p, with_gpus))
            for p in self.pods
        ]

    @staticmethod
    def _gpus(pod: Pod, with_gpus: bool) -> tuple[str, ...]:
        return tuple(f"{pod.node}/{gpu}" for gpu in pod.on) if with_gpus else ()

    def held(self) -> dict[str, Vec]:
        out: dict[str, Vec] = {}
        for p in self.pods:
            out[p.queue] = add(out.get(p.queue, ZERO), (p.cores, 0))
        return out


def clusters(
    nodes: int, gpus: int, pods_per_gpu: int, *, multi: bool = False, asks: tuple[int, ...] = ()
) -> st.SearchStrategy[Cluster]:
    """Up to `nodes` nodes of 1 to `gpus` GPUs, each GPU filled by up to `pods_per_gpu` pods of
    queues a and c (started 0 to 99 s); with `multi`, the first GPUs of a node may be held in
    pairs by pods of two whole GPUs; `asks`: the cores a one-GPU pod may ask (25, 50 or 100 by
    default)."""

    @st.composite
    def draw_cluster(draw: st.DrawFn) -> Cluster:
        sizes = {f"n{i}": draw(st.integers(1, gpus)) for i in range(draw(st.integers(1, nodes)))}
        pods: list[Pod] = []
        for node, count in sizes.items():
            wide = draw(st.integers(0, count // 2)) if multi else 0
            for gpu in range(0, 2 * wide, 2):  # pods holding two whole GPUs each
                queue, started = draw(st.sampled_from("ac")), float(draw(st.integers(0, 99)))
                pods.append(Pod(f"p{len(pods)}", queue, node, gpu, 200, started, span=2))
            for gpu in range(2 * wide, count):
                used = 0
                drawn = st.lists(st.sampled_from(asks or (25, 50, 100)), max_size=pods_per_gpu)
                for cores in draw(drawn):
                    if used + cores > 100:
                        break
                    used += cores
                    queue, started = draw(st.sampled_from("ac")), float(draw(st.integers(0, 99)))
                    pods.append(Pod(f"p{len(pods)}", queue, node, gpu, cores, started))
        return Cluster(sizes, tuple(pods))

    return draw_cluster()
