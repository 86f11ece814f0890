"""A queue counts the GPU memory its pods are given, by the rule placement gives it
(`units.memory_need_mmib`): a share asking cores only is given its cores' part of the GPU's
memory, a whole GPU all of it; so a memory cap cannot be passed with pods that ask cores only."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from vgpu.core.queues.jobs import QueuedPod, given_memory, group
from vgpu.core.units import memory_need_mmib, memory_units_given, mib_to_mmib

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
