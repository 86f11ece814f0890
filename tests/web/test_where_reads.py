"""The placement state of each read reuses the parses of the reads before it (`Parses`): an
unchanged pod or node is not parsed again, and the answers are those of a state built afresh."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.inspect.builders import node, pod
from vgpu.api.resources import DEFAULT_NAMES
from vgpu.inspect.snapshot import Snapshot
from vgpu.inspect.web import where
from vgpu.inspect.web.view import build_view
from vgpu.inspect.web.where import Parses, Placer

A100 = ("A100-SXM4-80GB", 81920)
NAMES = [f"a/p{i}" for i in range(4)]


def _pod(key: str, kind: str, cores: int, gpu: int) -> dict[str, Any]:
    if kind == "bound":
        return pod(key, node="n1", shares={"main": [(gpu, cores, 1024)]})
    if kind == "finished":
        return pod(key, node="n1", shares={"main": [(gpu, cores, 1024)]}, phase="Succeeded")
    gang = {"vgpu.io/gang-name": "g", "vgpu.io/gang-size": "2"} if kind == "gang" else None
    return pod(key, asks={"main": (cores, 0)}, phase="Pending", annotations=gang)


pods = st.dictionaries(
    st.sampled_from(NAMES),
    st.tuples(
        st.sampled_from(["bound", "finished", "waiting", "gang"]),
        st.sampled_from([10, 50, 100, 150]),  # 150 on one GPU: an ask that cannot be read
        st.integers(0, 1),
    ),
    max_size=len(NAMES),
)
snapshots = st.builds(
    lambda gpus, ready, chosen: Snapshot(
        (node("n1", [A100] * gpus, ready=ready),),
        tuple(_pod(k, *v) for k, v in sorted(chosen.items())),
    ),
    st.integers(2, 3),
    st.booleans(),
    pods,
)


@settings(max_examples=60, deadline=None)
@given(reads=st.lists(snapshots, min_size=2, max_size=4))
def test_a_state_built_from_kept_parses_answers_as_one_built_afresh(
    reads: list[Snapshot],
) -> None:
    """Reads one after another, pods coming, going and changing under the same names: each
    read's answers with the parses kept from the reads before equal those of a fresh state."""
    parses = Parses(DEFAULT_NAMES)
    for snapshot in reads:
        ready = ["n1"] if snapshot.nodes[0]["status"]["conditions"][-1]["status"] == "True" else []
        kept = build_view(snapshot, None, DEFAULT_NAMES, parses=parses).placer
        assert kept is not None
        fresh = Placer(snapshot, DEFAULT_NAMES, ready)
        assert [kept.where(k) for k in NAMES] == [fresh.where(k) for k in NAMES]


def test_an_unchanged_pod_or_node_is_parsed_once_over_many_reads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The cost of the first pod page after a read is the pods and nodes that changed."""
    calls: list[str] = []
    for name in ("pod_spec", "node_spec"):
        real = getattr(where, name)
        monkeypatch.setattr(where, name, _counted(real, name, calls))
    still = pod("a/still", node="n1", shares={"main": [(0, 50, 1024)]})
    parses = Parses(DEFAULT_NAMES)
    for n in range(3):
        moving = pod(f"a/new{n}", asks={"main": (10, 0)}, phase="Pending")
        snapshot = Snapshot((node("n1", [A100]),), (copy.deepcopy(still), moving))
        placer = build_view(snapshot, None, DEFAULT_NAMES, parses=parses).placer
        assert placer is not None and placer.where(f"a/new{n}") is not None
    assert calls == ["pod_spec", "pod_spec", "node_spec", "pod_spec", "pod_spec"]  # then new pods


def _counted(real: Any, name: str, calls: list[str]) -> Any:
    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(name)
        return real(*args, **kwargs)

    return counted
