"""The queued replay counts memory as the extender does (`--queue-memory`): the queue whose
fractional pods ask memory explicitly holds and deserves those units, the others the memory
their pods are given in proportion to their cores, and the fair order over both dimensions still
gives each queue its weight's part of the cores."""

from __future__ import annotations

import pytest

from tests.builders import make_node, make_pod
from vgpu.cli.main import main
from vgpu.cli.trace_files import read_lifetimes, read_trace
from vgpu.core.policy.specs import make_policy
from vgpu.core.queues.proportion import QueueSpec
from vgpu.core.workload import Workload
from vgpu.sim.poisson import MEMORY_UNIT_MIB, Arrival, generate, is_large
from vgpu.sim.queues.replay import QueuedReplay
from vgpu.sim.queues.settings import QueueSetup, build

SPECS = (QueueSpec("A", 1), QueueSpec("B", 1))


def test_only_the_memory_queues_fractional_pods_ask_memory_units() -> None:
    trace = read_trace()
    setup = build("A=1,B=1", starts=[], stricts=[], memory="B", measure="30m")
    arrivals = generate(setup, trace.pods, read_lifetimes(), cluster_cores=40_000, seed=3)
    asking = {a.queue for a in arrivals if a.memory}
    assert asking == {"B"}
    for a in arrivals:
        explicit = [c.memory_mib for c in a.pod.gpu_containers if c.memory_mib]
        assert a.memory == sum(-(-m // MEMORY_UNIT_MIB) for m in explicit)
        assert not (a.memory and is_large(a.pod))  # whole GPUs come with all their memory


def test_the_replay_counts_the_memory_cores_only_pods_are_given() -> None:
    """B's pods ask 50 cores and 8 GiB (32 units), A's 50 cores, which on a 16 GiB GPU are given
    8 GiB too: the replay's book holds 32 units for each pod of either queue, as the extender's
    does (`vgpu.core.queues.jobs.given_memory`)."""
    setup = QueueSetup(SPECS, measure_s=120.0, memory="B")
    arrivals = [Arrival.of(1.0, "A", make_pod(f"a{i}", 50), 3600.0) for i in range(6)]
    arrivals += [
        Arrival.of(1.0, "B", make_pod(f"b{i}", 50, memory_mib=8192), 3600.0) for i in range(6)
    ]
    replay = QueuedReplay(
        (make_node("n", gpus=4),), make_policy("bestfit", Workload((), ())), setup, 1
    )
    replay.run(sorted(arrivals, key=lambda a: (a.at, str(a.pod.key))))
    assert replay.capacity == (400, 4 * 16_384 // MEMORY_UNIT_MIB)
    assert replay.held == {"A": 200, "B": 200}
    assert replay.held_memory == {"A": 4 * 32, "B": 4 * 32}
    assert replay.due["A"][1] == replay.due["B"][1] == 4 * 32  # 256 units, 192 asked each
    assert replay.asked_memory == {"A": 2 * 32, "B": 2 * 32}


def test_a_placed_pod_counts_the_memory_it_holds_on_its_own_gpu() -> None:
    """On a 16 GiB and an 80 GiB GPU, a 50-core pod holds 32 units on the small one and 160 on
    the large one: once placed its queue counts what it holds, not the 160 it was counted while
    waiting, and gives back exactly that when it ends (pods of 60 s make way for others)."""
    setup = QueueSetup((QueueSpec("A", 1),), measure_s=120.0)
    short = [Arrival.of(1.0, "A", make_pod(f"s{i}", 50), 60.0) for i in range(4)]
    long = [Arrival.of(2.0, "A", make_pod(f"l{i}", 50), 3600.0) for i in range(4)]
    nodes = (make_node("small", gpus=1), make_node("big", gpus=1, memory_mib=81920))
    replay = QueuedReplay(nodes, make_policy("bestfit", Workload((), ())), setup, 1)
    replay.run(short + long)
    assert replay.capacity == (200, 64 + 320)
    assert sorted(replay.running) == [f"default/l{i}" for i in range(4)]
    assert replay.held == {"A": 200}
    assert replay.held_memory == {"A": 2 * 32 + 2 * 160}
    assert replay.asked_memory == {"A": 0}


def test_a_malformed_queue_memory_flag_is_refused_in_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["simulate", "--queues", "A=1,B=3", "--queue-memory", "C"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--queue-memory" in err[0]
