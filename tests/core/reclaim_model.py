"""The reclaim tests' own GPU model: nodes of GPUs with 100 cores each, running pods on one GPU
each, and a waiting pod that asks either some cores of one GPU or whole GPUs of one node (what
kube-scheduler and the device plugin allow a single pod: every GPU it gets is on the node it
binds to).
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
                left[(p.node, p.gpu)] -= p.cores
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
        return (f"{pod.node}/{pod.gpu}",) if with_gpus else ()

    def held(self) -> dict[str, Vec]:
        out: dict[str, Vec] = {}
        for p in self.pods:
            out[p.queue] = add(out.get(p.queue, ZERO), (p.cores, 0))
        return out


def clusters(nodes: int, gpus: int, pods_per_gpu: int) -> st.SearchStrategy[Cluster]:
    """Up to `nodes` nodes of 1 to `gpus` GPUs, each GPU filled by up to `pods_per_gpu` pods of
    queues a and c (started 0 to 99 s)."""

    @st.composite
    def draw_cluster(draw: st.DrawFn) -> Cluster:
        sizes = {f"n{i}": draw(st.integers(1, gpus)) for i in range(draw(st.integers(1, nodes)))}
        pods: list[Pod] = []
        for node, count in sizes.items():
            for gpu in range(count):
                used = 0
                asks = st.lists(st.sampled_from([25, 50, 100]), max_size=pods_per_gpu)
                for cores in draw(asks):
                    if used + cores > 100:
                        break
                    used += cores
                    queue, started = draw(st.sampled_from("ac")), float(draw(st.integers(0, 99)))
                    pods.append(Pod(f"p{len(pods)}", queue, node, gpu, cores, started))
        return Cluster(sizes, tuple(pods))

    return draw_cluster()
