"""Resource names from one domain: what the node advertises is what the extender and report read."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vgpu.api.resources import ResourceNames, UnitKind, resource_names
from vgpu.core.errors import ConfigError

LABEL = st.from_regex(r"[a-z0-9]([-a-z0-9]{0,10}[a-z0-9])?", fullmatch=True)


@given(st.lists(LABEL, min_size=1, max_size=4).map(".".join))
def test_every_name_is_built_from_the_domain(domain: str) -> None:
    names = resource_names(domain)
    assert (names.cores, names.memory) == (f"{domain}/cores", f"{domain}/memory")
    assert names.inventory == f"{domain}/gpu-inventory"
    assert names.kind_of(names.cores) is UnitKind.CORES
    assert names.kind_of(names.memory) is UnitKind.MEMORY
    with pytest.raises(ValueError, match="neither"):
        names.kind_of(ResourceNames(domain + "x").cores)


@pytest.mark.parametrize("domain", ["", "Vgpu.io", "vgpu.io/", "-vgpu.io", "a..b", "x" * 254])
def test_a_bad_domain_is_refused_naming_the_flag(domain: str) -> None:
    with pytest.raises(ConfigError, match=r"--resource-domain: .* e\.g\. vgpu\.io"):
        resource_names(domain)


def test_the_default_domain_is_vgpu_io() -> None:
    assert ResourceNames().cores == "vgpu.io/cores"
    assert resource_names("vgpu.io") == ResourceNames()
