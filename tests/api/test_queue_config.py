"""The queue ConfigMap's reader: what the chart renders is read as written, and anything malformed
is refused with one line naming the field, never a traceback or a silent default."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vgpu.api.queues.config import (
    UNLIMITED,
    QueueConfig,
    gates_of,
    queue_of,
    read_config,
)
from vgpu.api.queues.namespaces import Binding, astray, bound_queue
from vgpu.core.errors import ConfigError
from vgpu.core.queues.proportion import QueueSpec


def _text(**top: Any) -> str:
    """The document; each queue bound to no namespace is bound to `ns` (the tests of other
    fields need not say it)."""
    queues = top.get("queues")
    if isinstance(queues, list):
        top["queues"] = [_bound(q) for q in queues]
    return json.dumps(top)


def _bound(queue: Any) -> Any:
    if not isinstance(queue, dict) or {"namespaces", "namespaceSelector"} & set(queue):
        return queue
    return {**queue, "namespaces": [f"ns-{len(str(queue))}"]}


def test_queues_are_read_as_the_chart_renders_them() -> None:
    text = _text(
        queues=[
            {"name": "a", "weight": 1, "namespaces": ["team-a"]},
            {"name": "b", "weight": 3, "cap": {"cores": 400}, "reclaim": True, **B},
            {"name": "big", "strictSeconds": 600, "namespaces": ["big", "big-dev"]},
        ],
        minRuntimeSeconds=60,
        intervalSeconds=1,
    )
    config = read_config(text)
    assert config.queues == (
        QueueSpec("a", 1),
        QueueSpec("b", 3, (400, UNLIMITED), reclaim=True),
        QueueSpec("big", 1, strict_s=600.0),
    )
    assert (config.min_runtime_s, config.interval_s, config.reclaim_per_pass) == (60.0, 1.0, 4)
    assert config.bindings == (
        Binding("a", frozenset({"team-a"})),
        Binding("b", labels=(("team", "b"),)),
        Binding("big", frozenset({"big", "big-dev"})),
    )


B = {"namespaceSelector": {"matchLabels": {"team": "b"}}}


def test_an_empty_configuration_has_no_queues() -> None:
    assert read_config("{}") == QueueConfig()


BAD = [
    ("not json", "queues.json: not JSON"),
    ("[]", "queues.json: a list, must be an object"),
    (_text(queue=[]), "queues.json.queue: unknown setting"),
    (_text(queues={}), "queues.json.queues: must be a list"),
    (_text(queues=[{"name": ""}]), "queues[0].name: '' must be a label value"),
    (_text(queues=[{"name": "a b"}]), "queues[0].name: 'a b' must be a label value"),
    (_text(queues=[{"name": "a", "weight": 0}]), "queues[0].weight: 0 must be a whole number"),
    (_text(queues=[{"name": "a", "weight": "3"}]), "queues[0].weight: '3' must be a whole"),
    (_text(queues=[{"name": "a", "weight": True}]), "queues[0].weight: True must be"),
    (_text(queues=[{"name": "a", "weight": 1.5}]), "queues[0].weight: 1.5 must be"),
    (_text(queues=[{"name": "a", "reclaim": "yes"}]), "queues[0].reclaim: 'yes' must be true"),
    (_text(queues=[{"name": "a", "cap": {"cores": -1}}]), "queues[0].cap.cores: -1 must be"),
    (_text(queues=[{"name": "a", "cap": {"gpus": 1}}]), "queues[0].cap.gpus: unknown setting"),
    (_text(queues=[{"name": "a", "cap": {}}]), "queues[0].cap: name cores and/or memory"),
    (_text(queues=[{"name": "a", "strictSeconds": -5}]), "queues[0].strictSeconds: -5 is out"),
    (_text(queues=[{"name": "a", "wieght": 2}]), "queues[0].wieght: unknown setting"),
    (_text(queues=[{"name": "a"}, {"name": "a"}]), "queues[1].name: 'a' appears twice"),
    (json.dumps({"queues": [{"name": "a"}]}), "queues[0]: bind queue 'a' to its namespaces"),
    (_text(queues=[{"name": "a", "namespaces": "x"}]), "queues[0].namespaces: 'x' must be a list"),
    (_text(queues=[{"name": "a", "namespaces": ["X_"]}]), "queues[0].namespaces: ['X_'] must"),
    (
        _text(queues=[{"name": "a", "namespaces": ["x"]}, {"name": "b", "namespaces": ["x"]}]),
        "queues[1].namespaces: 'x' is bound to queue 'a' already",
    ),
    (
        _text(queues=[{"name": "a", "namespaceSelector": {"matchLabels": {}}}]),
        "queues[0].namespaceSelector.matchLabels: name at least one label",
    ),
    (
        _text(queues=[{"name": "a", "namespaceSelector": {"matchExpressions": []}}]),
        "queues[0].namespaceSelector: give exactly matchLabels",
    ),
    (
        _text(queues=[{"name": "a", "namespaceSelector": {"matchLabels": {"t": 1}}}]),
        "queues[0].namespaceSelector.matchLabels: 't': 1 is not a label",
    ),
    (_text(minRuntimeSeconds="5m"), "minRuntimeSeconds: '5m' must be a number"),
    (_text(intervalSeconds=0), "intervalSeconds: 0 is out of range"),
    (_text(reclaimPerPass=1.5), "reclaimPerPass: 1.5 must be a whole number"),
    # a whole number past a float's range raised OverflowError (math.isnan converts it): a
    # traceback from `vgpu inspect --queues`, and every release pass of the leader failed
    (_text(minRuntimeSeconds=10**400), "minRuntimeSeconds: 1000"),
    (_text(reclaimPerPass=10**400), "reclaimPerPass: 1000"),
    (_text(queues=[{"name": "a", "strictSeconds": 10**400}]), "queues[0].strictSeconds: 1000"),
]


@pytest.mark.parametrize(("text", "line"), BAD)
def test_malformed_configuration_is_refused_in_one_line_naming_the_field(
    text: str, line: str
) -> None:
    with pytest.raises(ConfigError) as err:
        read_config(text)
    message = str(err.value)
    assert message.startswith(line), message
    assert "\n" not in message


JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers(-10, 10**7) | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=12,
)
QUEUE_FIELDS = st.fixed_dictionaries(
    {},
    optional={
        "name": st.text(max_size=70) | JSONISH,
        "weight": JSONISH,
        "cap": st.dictionaries(st.sampled_from(["cores", "memory", "x"]), JSONISH) | JSONISH,
        "reclaim": JSONISH,
        "strictSeconds": JSONISH,
        "namespaces": st.lists(st.sampled_from(["x", "y", "z"]), max_size=2) | JSONISH,
        "namespaceSelector": st.fixed_dictionaries({"matchLabels": JSONISH}) | JSONISH,
    },
)


@given(st.lists(QUEUE_FIELDS, max_size=4), JSONISH)
def test_any_configuration_is_read_or_refused_with_one_line(
    queues: list[dict[str, Any]], runtime: Any
) -> None:
    text = json.dumps({"queues": queues, "minRuntimeSeconds": runtime}, allow_nan=True)
    try:
        config = read_config(text)
    except ConfigError as err:
        assert "\n" not in str(err) and str(err)
        return
    assert len(config.queues) == len(queues)
    assert all(q.weight >= 1 for q in config.queues)
    assert [b.queue for b in config.bindings] == [q.name for q in config.queues]
    assert all(b.names or b.labels for b in config.bindings)  # no queue serves nobody
    named = [n for b in config.bindings for n in b.names]
    assert len(named) == len(set(named))  # a namespace names one queue


def test_pods_name_their_queue_by_label() -> None:
    assert queue_of({"labels": {"vgpu.io/queue": "a"}}) == "a"
    assert queue_of({"labels": {"app": "x"}}) is None
    assert queue_of({}) is None
    spec = {"schedulingGates": [{"name": "vgpu.io/queue"}, {"name": "other"}]}
    assert gates_of(spec) == ["vgpu.io/queue", "other"]


def test_a_namespace_belongs_to_the_first_queue_that_names_it() -> None:
    config = read_config(
        _text(
            queues=[
                {"name": "a", "namespaces": ["team-a"]},
                {"name": "b", "namespaceSelector": {"matchLabels": {"team": "b"}}},
                {"name": "c", "namespaceSelector": {"matchLabels": {"team": "b", "tier": "x"}}},
            ]
        )
    )
    assert bound_queue(config.bindings, "team-a", {"team": "b"}) == "a"  # by name first
    assert bound_queue(config.bindings, "other", {"team": "b", "tier": "x"}) == "b"
    assert bound_queue(config.bindings, "other", {"tier": "x"}) is None
    assert bound_queue(config.bindings, "team-b", {}) is None  # no opting in by a name alone


def test_a_pod_counts_only_in_its_namespaces_queue() -> None:
    bindings = (Binding("a", frozenset({"team-a"})), Binding("b", labels=(("team", "b"),)))
    assert astray(bindings, "team-a", {}, "a") is None
    assert astray(bindings, "team-a", {}, "b") == "namespace team-a is bound to queue a, not b"
    assert astray(bindings, "lab", {"team": "b"}, "b") is None
    assert astray(bindings, "lab", {}, "b") == "namespace lab is bound to no queue, not b"
