import pytest

from vgpu.core.ids import GpuUUID
from vgpu.core.model import Gpu, GpuSelector, model_matches


@pytest.mark.parametrize(
    ("pattern", "model", "expected"),
    [
        ("A100", "NVIDIA A100-SXM4-80GB", True),
        ("a100", "NVIDIA A100-SXM4-80GB", True),
        ("A10", "NVIDIA A100-SXM4-80GB", False),
        ("A10", "NVIDIA A10", True),
        ("A100-SXM4", "NVIDIA A100-SXM4-80GB", True),
        ("V100M16", "V100M32", False),
        ("H100", "NVIDIA A100-SXM4-80GB", False),
        ("", "T4", False),
    ],
)
def test_model_matching_is_by_whole_tokens(pattern: str, model: str, expected: bool) -> None:
    assert model_matches(pattern, model) is expected


def _gpu(model: str, uuid: str = "GPU-1") -> Gpu:
    return Gpu(GpuUUID(uuid), 0, model, 16384)


def test_selector_include_exclude_and_uuid() -> None:
    sel = GpuSelector(include_models=("A100", "H100"), exclude_models=("PCIE",))
    assert sel.allows(_gpu("NVIDIA A100-SXM4-80GB"))
    assert not sel.allows(_gpu("NVIDIA A100-PCIE-40GB"))
    assert not sel.allows(_gpu("Tesla T4"))
    by_uuid = GpuSelector(exclude_uuids=frozenset({GpuUUID("GPU-1")}))
    assert not by_uuid.allows(_gpu("T4", "GPU-1"))
    assert by_uuid.allows(_gpu("T4", "GPU-2"))
    assert GpuSelector().is_any
