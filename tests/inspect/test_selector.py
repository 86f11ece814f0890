"""Label selectors as kubectl takes them, matched locally for saved snapshots."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vgpu.inspect.selector import SelectorError, parse_selector

keys = st.sampled_from(["pool", "zone", "nvidia.com/gpu.product"])
values = st.sampled_from(["a", "b", "A100-SXM4-80GB"])
labelsets = st.dictionaries(keys, values)


@given(labelsets, keys, values)
def test_each_operator_means_what_kubernetes_says(labels: dict[str, str], k: str, v: str) -> None:
    assert parse_selector(f"{k}={v}")(labels) == (labels.get(k) == v)
    assert parse_selector(f"{k}=={v}")(labels) == (labels.get(k) == v)
    assert parse_selector(f"{k}!={v}")(labels) == (labels.get(k) != v)
    assert parse_selector(k)(labels) == (k in labels)
    assert parse_selector(f"!{k}")(labels) == (k not in labels)
    assert parse_selector(f"{k} in ({v}, zz)")(labels) == (labels.get(k) in {v, "zz"})
    assert parse_selector(f"{k} notin ({v})")(labels) == (labels.get(k) != v)


@given(labelsets, keys, values, keys)
def test_commas_mean_and(labels: dict[str, str], k: str, v: str, other: str) -> None:
    both = parse_selector(f"{k}={v}, !{other}")(labels)
    assert both == (labels.get(k) == v and other not in labels)


@pytest.mark.parametrize("text", ["", "a in b", "=x", "a=b,,", "a=(b)"])
def test_unreadable_selectors_are_named(text: str) -> None:
    with pytest.raises(SelectorError, match="--selector"):
        parse_selector(text)
