"""Reclaim evicts nobody for a pod whose requests of resources other than CPU and memory no
node could hold: kube-scheduler's NodeResourcesFit refuses every node for it, so it never binds
whatever reclaim frees (`vgpu.api.noderoom`)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.extender.builders import Wire
from tests.extender.conftest import Harness
from tests.extender.test_queue_node_constraints import _constrain, _node, _two_teams
from tests.extender.test_queue_release import _held, _pass, _pod, _releaser, _running, _watched

Obj = dict[str, Any]


def _listing(name: str, **allocatable: str) -> Obj:
    node = _node(name)
    node["status"]["allocatable"].update(allocatable)
    return node


def _evictions_for(harness: Harness, requests: dict[str, str], **nodes: str) -> int:
    """Two nodes (each listing `nodes` in its allocatable) full of team a's pods; team b's
    reclaiming pod asks one whole GPU and `requests`; how many pods one pass evicts."""
    harness.put(_listing("n1", **nodes))
    harness.put(_listing("n2", **nodes))
    daemon = _two_teams(harness)
    wire = Wire(daemon.port)
    _running(harness, daemon, wire, "victim1", "a", 100, on="n1")
    _running(harness, daemon, wire, "victim2", "a", 100, on="n2")
    _held(harness, "want", "b", 100)
    containers = _pod(harness, "want")["spec"]["containers"]
    containers[0]["resources"].setdefault("requests", {}).update(requests)
    _constrain(harness, "want", containers=containers)
    _watched(daemon, "b/want")
    releaser = _releaser(daemon)
    _pass(releaser)
    return releaser.evicted_total


@pytest.mark.parametrize(
    ("requests", "listed"),
    [
        ({"ephemeral-storage": "1Pi"}, {"ephemeral-storage": "100Gi"}),
        ({"example.com/fpga": "3"}, {"example.com/fpga": "2"}),
        ({"ephemeral-storage": "1e30"}, {"ephemeral-storage": "100Gi"}),  # past any capacity
    ],
)
def test_reclaim_evicts_nobody_for_a_pod_asking_more_than_any_node_has(
    harness: Harness, requests: dict[str, str], listed: dict[str, str]
) -> None:
    assert _evictions_for(harness, requests, **listed) == 0


@pytest.mark.parametrize(
    ("requests", "listed"),
    [
        ({"ephemeral-storage": "10Gi"}, {"ephemeral-storage": "100Gi"}),  # it fits
        ({"example.com/dra-backed": "1"}, {}),  # no node lists it: not judged (module doc)
    ],
)
def test_reclaim_still_evicts_for_a_pod_whose_other_requests_a_node_could_hold(
    harness: Harness, requests: dict[str, str], listed: dict[str, str]
) -> None:
    assert _evictions_for(harness, requests, **listed) == 1
