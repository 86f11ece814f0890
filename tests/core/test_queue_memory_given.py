"""A queue counts the GPU memory its pods are given, by the rule placement gives it
(`units.memory_need_mmib`): a share asking cores only is given its cores' part of the GPU's
memory, a whole GPU all of it; so a memory cap cannot be passed with pods that ask cores only."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from vgpu.core.ids import GpuUUID
from vgpu.core.model import GpuShare
from vgpu.core.queues.jobs import QueuedPod, given_memory, group, held_memory
from vgpu.core.units import (
    CORES_PER_GPU,
    memory_need_mmib,
    memory_units_given,
    memory_units_held,
    mib_to_mmib,
)

UNIT = 256


def test_a_cores_only_share_counts_its_cores_part_of_the_gpus_memory() -> None:
    assert memory_units_given(50, None, 81920, UNIT) == 160
    assert memory_units_given(1, None, 16384, UNIT) == 1  # 0.64 units: rounded up, never 0


def test_a_whole_gpu_counts_all_its_memory_and_an_explicit_ask_its_units() -> None:
    assert memory_units_given(200, None, 81920, UNIT) == 640
    assert memory_units_given(50, 40 * UNIT, 81920, UNIT) == 40
    assert memory_units_given(0, None, 81920, UNIT) == 0


@given(st.integers(1, 99), st.integers(1, 200_000), st.sampled_from([1, 64, 256, 1024]))
def test_a_share_is_never_counted_less_than_placement_gives_it(
    cores: int, gpu_mib: int, unit: int
) -> None:
    units = memory_units_given(cores, None, gpu_mib, unit)
    need = memory_need_mmib(cores, None, gpu_mib)
    assert units * mib_to_mmib(unit) >= need > (units - 1) * mib_to_mmib(unit)


def test_the_book_counts_a_cores_only_pods_memory_against_its_queue() -> None:
    pods = [
        QueuedPod("q/run", "q", "q", (50, 0), gated=False, gpus=((50, None),)),
        QueuedPod("q/wait", "q", "q", (50, 0), gated=True, gpus=((50, None),)),
    ]
    grouped = group([given_memory(p, 81920, UNIT) for p in pods], (400, 1280))
    assert grouped.book.by_queue == {"q": (50, 160)}
    assert [j.ask for j in grouped.jobs] == [(50, 160)]


def test_a_placed_share_counts_the_memory_it_holds_on_its_own_gpu() -> None:
    """Half of a 16 GiB GPU holds 32 units, not the 160 it would hold on the largest GPU (80
    GiB); a whole GPU its memory in whole units, as capacity counts it; a share rounded up."""
    assert memory_units_held(50, mib_to_mmib(8192), UNIT) == 32
    assert memory_units_held(CORES_PER_GPU, mib_to_mmib(16384 + 100), UNIT) == 64
    assert memory_units_held(1, memory_need_mmib(1, None, 16384), UNIT) == 1
    assert memory_units_held(0, 0, UNIT) == 0


@given(
    st.integers(0, 300).map(lambda c: c if c < CORES_PER_GPU else c // 100 * 100),
    st.one_of(st.none(), st.integers(1, 16_384)),
    st.integers(1, 200_000),
    st.sampled_from([1, 64, 256, 1024]),
)
def test_held_is_given_on_the_gpu_the_share_is_on(
    cores: int, memory: int | None, gpu_mib: int, unit: int
) -> None:
    """One contract: what a placed container holds counts what `memory_units_given` says it is
    given on that GPU (a whole GPU's share per GPU, as placement makes it)."""
    memory = None if cores == 0 or cores >= CORES_PER_GPU else memory
    if cores >= CORES_PER_GPU:
        shares = [(CORES_PER_GPU, mib_to_mmib(gpu_mib))] * (cores // CORES_PER_GPU)
    else:
        shares = [(cores, memory_need_mmib(cores, memory, gpu_mib) if cores else 0)]
    held = sum(memory_units_held(c, m, unit) for c, m in shares)
    assert held == memory_units_given(cores, memory, gpu_mib, unit)


def test_a_placed_pod_counts_what_it_holds_and_a_waiting_one_the_largest_gpu() -> None:
    """On 16 GiB and 80 GiB GPUs, a 50-core pod placed on the 16 GiB one counts 32 units (what
    it holds), a waiting one 160 (the most any GPU would give it, so no cap is passed)."""
    pods = [
        QueuedPod("q/run", "q", "q", (50, 0), gated=False, gpus=((50, None),)),
        QueuedPod("q/wait", "q", "q", (50, 0), gated=True, gpus=((50, None),)),
    ]
    small = (GpuShare(GpuUUID("GPU-small"), 50, mib_to_mmib(8192)),)
    counted = [held_memory(pods[0], small, UNIT), given_memory(pods[1], 81920, UNIT)]
    grouped = group(counted, (200, 64 + 320))
    assert grouped.book.by_queue == {"q": (50, 32)}
    assert [j.ask for j in grouped.jobs] == [(50, 160)]
