"""Any kubeconfig file, however malformed, gives one line naming what is wrong, never the client
library's internals ("'str' object does not support item assignment")."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vgpu.adapters.kube.credentials import load_configuration, shape_problem
from vgpu.adapters.kube.errors import KubeConfigMissing

scalars = st.none() | st.booleans() | st.integers() | st.text(max_size=5)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=8,
)
named = st.fixed_dictionaries(
    {"name": st.text(min_size=1, max_size=3) | values},
    optional={"cluster": values, "context": values, "user": values},
)
kubeconfigs = values | st.fixed_dictionaries(
    {"apiVersion": st.just("v1")},
    optional={
        "clusters": st.lists(named | values, max_size=2) | values,
        "contexts": st.lists(named | values, max_size=2) | values,
        "users": st.lists(named | values, max_size=2) | values,
        "current-context": st.text(max_size=3) | values,
    },
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kubeconfigs)
def test_a_malformed_kubeconfig_is_one_line_naming_the_file(doc: object) -> None:
    with tempfile.TemporaryDirectory() as where:
        path = Path(where) / "config"
        path.write_text(yaml.safe_dump(doc))
        try:
            load_configuration(str(path))
        except KubeConfigMissing as err:
            text = str(err)
            assert str(path) in text and "\n" not in text
            assert "does not support item assignment" not in text
            assert "object is not" not in text and "has no attribute" not in text


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        ("junk", "expected a mapping"),
        ({"clusters": 5}, "clusters:"),
        ({"users": [{"name": "u", "user": "x"}]}, "users[0].user"),
        ({"contexts": [{"context": {}}]}, "contexts[0].name"),
        ({"current-context": 3}, "current-context"),
    ],
)
def test_shape_problems_name_the_field(doc: object, field: str) -> None:
    problem = shape_problem(doc)
    assert problem is not None and field in problem


def test_a_kubeconfig_of_the_right_shape_has_no_shape_problem() -> None:
    doc = {
        "apiVersion": "v1",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:6443"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "current-context": "x",
    }
    assert shape_problem(doc) is None
