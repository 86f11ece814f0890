"""With the scheduler's certificate, a filter request only names its pod.
The pick and the parse come from the watch's view of the pod, never from the request's body; a
request body is never parsed; a pod the watch does not show is refused with an error, and
another scheduler's pod holds nothing. Over real HTTP against the fake API server (the wait for
the watch itself: test_watch_only.py)."""

from __future__ import annotations

import copy
import json
from typing import Any

from tests.extender.builders import make_node, make_pod
from tests.extender.conftest import Harness
from tests.waiting import wait_until
from vgpu.core.ids import PodKey
from vgpu.core.model import Phase
from vgpu.daemons.extender.daemon import ExtenderDaemon

Obj = dict[str, Any]


def _holdings(daemon: ExtenderDaemon) -> list[Any]:
    with daemon.cache.atomic():
        return sorted(((h.assignment, h.phase) for h in daemon.cache.ledger.holdings()), key=repr)


def _metric(daemon: ExtenderDaemon, name: str) -> float:
    value = daemon.metrics.registry.get_sample_value(name)
    return 0.0 if value is None else value


def test_a_filter_picks_what_the_watched_pod_asks_not_what_the_body_says(
    harness: Harness,
) -> None:
    harness.put(make_node("n1", gpus=4))
    daemon = harness.start()
    wire = harness.wire(daemon)
    harness.put(make_pod("p", cores=10))
    wait_until(lambda: daemon.cache.pod(PodKey("default/p")) is not None)
    forged = harness.pod("p")
    limits = forged["spec"]["containers"][0]["resources"]["limits"]
    limits["vgpu.io/cores"] = "400"  # four whole GPUs, same name and UID
    forged["metadata"]["resourceVersion"] = "999999"  # a version the watch has not parsed
    assert wire.filter(forged, ["n1"])["NodeNames"] == ["n1"]
    held = daemon.cache.holding(PodKey("default/p"))
    assert held is not None and held.phase is Phase.ASSUMED
    assert [s.cores for c in held.assignment.containers for s in c.shares] == [10]


def test_forged_future_versions_never_make_the_watch_forget_a_running_pod(
    harness: Harness,
) -> None:
    harness.put(make_node("n1", gpus=1))
    harness.put(make_pod("held", cores=100))
    daemon = harness.start()
    wire = harness.wire(daemon)
    assert wire.bind(harness.pod("held"), "n1") == ""
    wait_until(lambda: daemon.cache.node_states["n1"].free_cores == [0])
    pod = harness.pod("held")
    version = int(pod["metadata"]["resourceVersion"])
    for ahead in range(1, 201):  # every version the next writes will have, ended
        forged = copy.deepcopy(pod)
        forged["metadata"]["resourceVersion"] = str(version + ahead)
        forged["status"]["phase"] = "Succeeded"
        wire.raw(
            "POST", "/scheduler/filter", json.dumps({"Pod": forged, "NodeNames": ["n1"]}).encode()
        )
    running = harness.pod("held")
    running["status"]["phase"] = "Running"
    harness.put(running)  # a real write: its version is one of those forged
    harness.put(make_pod("next", cores=100))  # seen after that write: the watch keeps order
    wait_until(lambda: daemon.cache.pod(PodKey("default/next")) is not None)
    assert daemon.cache.pod(PodKey("default/held")) is not None
    assert daemon.cache.node_states["n1"].free_cores == [0]
    assert wire.filter(harness.pod("next"), ["n1"])["NodeNames"] == []


def test_a_filter_for_a_pod_the_watch_does_not_show_is_refused_and_holds_nothing(
    harness: Harness,
) -> None:
    harness.put(make_node("n1", gpus=1))
    daemon = harness.start(watch_wait=0.2)
    wire = harness.wire(daemon)
    harness.put(make_pod("real", cores=10))
    wait_until(lambda: daemon.cache.pod(PodKey("default/real")) is not None)
    ghost = make_pod("ghost", cores=100)
    ghost["metadata"]["uid"] = "uid-ghost"
    other_uid = harness.pod("real")
    other_uid["metadata"]["uid"] = "not-the-watched-one"
    for pod in (ghost, other_uid):
        out = wire.filter(pod, ["n1"])
        assert out["NodeNames"] == [] and pod["metadata"]["uid"] in out["Error"]
    assert _holdings(daemon) == []
    assert _metric(daemon, "vgpu_extender_unwatched_filters_total") == 2


def test_decoy_pods_of_another_scheduler_reserve_nothing(harness: Harness) -> None:
    harness.put(make_node("n1", gpus=1))
    daemon = harness.start()
    wire = harness.wire(daemon)
    decoy = make_pod("decoy", cores=100)
    decoy["spec"]["schedulerName"] = "another-scheduler"
    harness.put(decoy)
    gang = make_pod("decoy-gang", cores=100, annotations={"vgpu.io/gang-name": "g"})
    gang["metadata"]["annotations"]["vgpu.io/gang-size"] = "1"
    gang["spec"]["schedulerName"] = "another-scheduler"
    harness.put(gang)
    wait_until(lambda: daemon.cache.pod(PodKey("default/decoy-gang")) is not None)
    for _ in range(3):  # renewed as the attack renewed it
        wire.filter(harness.pod("decoy"), ["n1"])
        wire.filter(harness.pod("decoy-gang"), ["n1"])
    assert _holdings(daemon) == []
    harness.put(make_pod("ours", cores=100))
    wait_until(lambda: daemon.cache.pod(PodKey("default/ours")) is not None)
    assert wire.filter(harness.pod("ours"), ["n1"])["NodeNames"] == ["n1"]
    assert wire.bind(harness.pod("ours"), "n1") == ""


def learned(daemon: ExtenderDaemon) -> tuple[int, int]:
    """What the default policy has learned: pods observed, and its scores' generation."""
    policy = daemon.extender.pods.policies.default
    learner = getattr(policy, "learner", None)
    assert learner is not None, "the default policy learns its workload online"
    return learner.observed, policy.generation


def test_only_watched_pods_of_our_scheduler_teach_the_policy(harness: Harness) -> None:
    """A filter or prioritize for a pod the watch does not show (or shows with another UID) is
    refused, and one for another scheduler's pod is a hypothesis: the policy's learner counts
    neither, so forged shapes cannot move the scores of real pods."""
    harness.put(make_node("n1", gpus=4))
    harness.put(make_node("n2", gpus=4))
    decoy = make_pod("decoy", cores=100)
    decoy["spec"]["schedulerName"] = "another-scheduler"
    harness.put(decoy)
    harness.put(make_pod("real", cores=10))
    daemon = harness.start(watch_wait=0.05)
    wire = harness.wire(daemon)
    wait_until(lambda: daemon.cache.pod(PodKey("default/real")) is not None)
    wait_until(lambda: daemon.cache.pod(PodKey("default/decoy")) is not None)
    before = learned(daemon)
    other_uid = harness.pod("real")
    other_uid["metadata"]["uid"] = "not-the-watched-one"
    hypotheses = [harness.pod("decoy"), other_uid]
    for i in range(40):  # past the learner's first rebuilds (after 16 pods)
        ghost = make_pod(f"ghost-{i}", cores=100 * (1 + i % 4))
        ghost["metadata"]["uid"] = f"uid-ghost-{i}"
        hypotheses.append(ghost)
    for pod in hypotheses:
        wire.filter(pod, ["n1", "n2"])
        wire.prioritize(pod, ["n1", "n2"])
    assert learned(daemon) == before
    assert _holdings(daemon) == []
    wire.filter(harness.pod("real"), ["n1", "n2"])
    assert learned(daemon)[0] == before[0] + 1  # a watched pod of ours is learned from


def test_a_gang_member_of_another_scheduler_is_never_planned_beside_ours(
    harness: Harness,
) -> None:
    """A tenant names its gang on a pod of ours (a small ask) and on a decoy of another
    scheduler (three whole GPUs of four): the decoy is never sent to the extender, so neither its queue
    nor a filter of its own counts it, but the gang plan of our member reserved the decoy's
    GPUs too, renewed on every plan, and another team's pod found no GPU."""
    harness.put(make_node("n1", gpus=4))
    daemon = harness.start()
    wire = harness.wire(daemon)
    gang = {"vgpu.io/gang-name": "g", "vgpu.io/gang-size": "1"}
    harness.put(make_pod("ours", cores=10, annotations=dict(gang)))
    decoy = make_pod("decoy", cores=300, annotations=dict(gang))
    decoy["spec"]["schedulerName"] = "another-scheduler"
    harness.put(decoy)
    wait_until(lambda: daemon.cache.pod(PodKey("default/decoy")) is not None)
    wait_until(lambda: daemon.cache.pod(PodKey("default/ours")) is not None)
    assert wire.filter(harness.pod("ours"), ["n1"])["NodeNames"] == ["n1"]
    held = [h.assignment.pod for h, _ in _holdings_with_phase(daemon)]
    assert held == [PodKey("default/ours")]
    harness.put(make_pod("other-team", cores=200, namespace="team-b"))
    wait_until(lambda: daemon.cache.pod(PodKey("team-b/other-team")) is not None)
    assert wire.filter(harness.pod("other-team", "team-b"), ["n1"])["NodeNames"] == ["n1"]


def _holdings_with_phase(daemon: ExtenderDaemon) -> list[Any]:
    with daemon.cache.atomic():
        return [(h, h.phase) for h in daemon.cache.ledger.holdings()]
