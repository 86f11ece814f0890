"""A random cluster life through `World`: pods arrive, are placed and bound, admitted by the
kubelet model in any order, live a while and are deleted; agents restart now and then.
Used by `bench/handoff_soak.py` and the `soak`-marked test."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from tests.kubelet_model.pods import gang, random_pod
from tests.kubelet_model.soak_world import SoakWorld
from tests.kubelet_model.world import World

PATIENCE = 40  # steps a pod waits unplaced before it is given up as unschedulable (deleted)


@dataclass(frozen=True)
class Progress:
    """Where a soak stands: pods submitted, pods given up as unschedulable, steps run, and
    whether every pod is done (the last report)."""

    submitted: int
    unschedulable: int
    step: int
    drained: bool = False


Report = Callable[[World, Progress], None]


@dataclass(frozen=True)
class SoakConfig:
    pods: int = 10_000
    nodes: int = 3
    gpus: int = 8
    seed: int = 0
    topology: str = "none"
    report_numa: bool = False
    ignore_preferred: float = 0.02
    kubelet_restart_p: float = 0.02
    agent_restart_p: float = 0.005
    watch_lag: float = 0.0  # per bind, the kubelet admits before the agent's watch shows it
    gang_p: float = 0.03
    mean_life: float = 40.0  # steps an admitted pod lives
    admit_p: float = 0.5  # per node and step, the kubelet admits one of the pods bound to it
    lazy_release: bool = False  # deleted pods' devices freed at the next Allocate or List only
    publish_stale: bool = True  # the agent publishes what the checkpoint holds for pods gone
    kubelet_crash_p: float = 0.0  # per node and step, the kubelet restarts (first update first)
    release_p: float = 0.5  # per node and step, the agent's release step (List + resend)
    backoff: int = 0  # 0: a waiting pod is tried every step; N: after its k-th failure, again
    # in min(2**(k-1), N) steps (kube-scheduler's backoff: podInitialBackoffSeconds 1 s doubling to
    # podMaxBackoffSeconds 10 s, its defaults; the backoff queue's calculateBackoffDuration in
    # pkg/scheduler/backend/queue; a step a second)


@dataclass
class Waiting:
    """Per waiting pod: steps waited unplaced, failed attempts, the step it is tried again."""

    waited: dict[str, int] = field(default_factory=dict)
    failures: dict[str, int] = field(default_factory=dict)
    retry_at: dict[str, int] = field(default_factory=dict)

    def prune(self, world: World) -> None:
        """Keep nothing for pods gone (a long soak's memory is the components')."""
        for book in (self.waited, self.failures, self.retry_at):
            for gone in [k for k in book if k not in world.pods]:
                del book[gone]


def schedule_waiting(world: World, cfg: SoakConfig, step: int, waiting: Waiting) -> int:
    """One scheduling pass over the waiting pods (those due, with `cfg.backoff`); returns how
    many were given up as unschedulable (deleted after `PATIENCE` steps waited, unless a gang
    reservation holds them)."""
    given_up = 0
    for key in list(world.waiting):
        if step >= waiting.retry_at.get(key, 0):
            if world.schedule(key):
                continue
            failures = waiting.failures[key] = waiting.failures.get(key, 0) + 1
            if cfg.backoff:
                waiting.retry_at[key] = step + min(2 ** (failures - 1), cfg.backoff)
        waiting.waited[key] = waiting.waited.get(key, 0) + 1
        if waiting.waited[key] > PATIENCE and not world.cache.ledger.holding(key):
            world.delete(key)
            given_up += 1
    return given_up


def soak(cfg: SoakConfig, *, every: int = 0, report: Report | None = None) -> tuple[World, int]:
    """Run `cfg.pods` pods through the world; returns it and the number given up as
    unschedulable. Checks capacity and gangs after every step (AssertionError on a breach).
    With `report`, calls it each time another `every` pods have been submitted and once when
    all are done. The harness keeps nothing per pod gone, so a long soak's memory is the
    components'."""
    rng = random.Random(cfg.seed)
    world = SoakWorld(
        nodes=cfg.nodes,
        gpus=cfg.gpus,
        seed=cfg.seed + 1,
        topology=cfg.topology,
        report_numa=cfg.report_numa,
        ignore_preferred=cfg.ignore_preferred,
        restart_p=cfg.kubelet_restart_p,
        agent_restart_between=cfg.agent_restart_p,
        watch_lag=cfg.watch_lag,
        lazy_release=cfg.lazy_release,
        publish_stale=cfg.publish_stale,
    )
    waiting = Waiting()
    dies: dict[str, int] = {}
    unschedulable = submitted = step = 0
    mark = every
    while submitted < cfg.pods or world.waiting or any(n.queue for n in world.nodes.values()):
        step += 1
        if submitted < cfg.pods:
            if rng.random() < cfg.gang_p:
                members = gang(rng, f"g{step}", rng.randint(2, 4))
                for raw in members:
                    world.submit(raw)
                submitted += len(members)
            else:
                world.submit(random_pod(rng, f"p{step}"))
                submitted += 1
            if report is not None and every and submitted >= mark:
                report(world, Progress(submitted, unschedulable, step))
                mark += every
        unschedulable += schedule_waiting(world, cfg, step, waiting)
        for node in world.nodes.values():
            # Slower than binding, so that several pods wait on a node at once (invariant I).
            if rng.random() < cfg.admit_p:
                world.admit_next(node)
            if rng.random() < cfg.agent_restart_p:
                world.restart_agent(node)
            if cfg.kubelet_crash_p and rng.random() < cfg.kubelet_crash_p:
                world.restart_kubelet(node)
            if cfg.lazy_release and rng.random() < cfg.release_p:
                world.release(node)
        for key in list(world.pods):
            if key in world.waiting or any(key in n.queue for n in world.nodes.values()):
                continue
            due = dies.setdefault(key, step + int(rng.expovariate(1 / cfg.mean_life)) + 1)
            if step >= due:
                world.delete(key)
        waiting.prune(world)
        for gone in [k for k in dies if k not in world.pods]:
            del dies[gone]
        assert not world.over_capacity(), world.over_capacity()
        assert not world.partial_gangs(), world.partial_gangs()
    if report is not None:
        report(world, Progress(submitted, unschedulable, step, drained=True))
    return world, unschedulable
