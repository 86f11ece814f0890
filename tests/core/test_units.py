import pytest

from vgpu.core.errors import InvalidRequest
from vgpu.core.units import gpu_count, memory_need_mmib, validate_cores, validate_memory


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (150, "not a multiple of 100"),
        (-5, "negative"),
        (2.5, "not a whole number"),
        ("abc", "not a whole number"),
        (True, "not a whole number"),
    ],
    ids=["150", "negative", "fraction", "text", "bool"],
)
def test_bad_cores_name_the_field_and_fix(value: object, message: str) -> None:
    with pytest.raises(InvalidRequest) as err:
        validate_cores(value, "spec.containers[0].resources.limits[vgpu.io/cores]")
    assert message in str(err.value)
    assert "vgpu.io/cores" in str(err.value)


def test_150_suggests_the_neighbouring_valid_values() -> None:
    with pytest.raises(InvalidRequest) as err:
        validate_cores(150)
    assert "100 or 200" in str(err.value)


@pytest.mark.parametrize("value", [0, 1, 30, 99, 100, 200, 800, "40", 40.0])
def test_good_cores(value: object) -> None:
    assert validate_cores(value) == int(value)  # type: ignore[call-overload]


def test_memory_without_cores_is_refused() -> None:
    with pytest.raises(InvalidRequest, match="without GPU cores"):
        validate_memory(4096, 0)


def test_memory_larger_than_any_gpu_is_refused() -> None:
    with pytest.raises(InvalidRequest, match="more than the largest GPU"):
        validate_memory(90_000, 30, largest_gpu_mib=81_920)


def test_memory_with_whole_gpus_is_refused() -> None:
    with pytest.raises(InvalidRequest, match="whole GPUs come with all their memory"):
        validate_memory(1024, 200)


def test_proportional_memory_is_exact() -> None:
    # 47 % of a 16 GiB GPU is 7700.48 MiB: exact in mMiB, no rounding.
    assert memory_need_mmib(47, None, 16384) == 7_700_480
    assert memory_need_mmib(47, 4096, 16384) == 4_096_000


def test_gpu_count() -> None:
    assert [gpu_count(c) for c in (0, 1, 99, 100, 300)] == [0, 1, 1, 1, 3]
