"""A gang named by `scheduling.x-k8s.io/pod-group` needs its PodGroup's minMember, an API read.
That read happens on a worker, never on the serving loop: while the API server takes its time
to answer it (two seconds, here), another pod's filter is answered at once."""

from __future__ import annotations

import threading
import time

from tests.extender.builders import Wire, make_node, make_pod
from tests.extender.conftest import Harness
from tests.extender.test_queue_release import _daemon, _watched
from tests.waiting import wait_until

GROUP = "scheduling.x-k8s.io/pod-group"


def test_a_pod_groups_read_never_holds_other_filters(harness: Harness) -> None:
    harness.put(make_node("n1", gpus=2))
    daemon = _daemon(harness)
    harness.put(
        {
            "apiVersion": "scheduling.x-k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": "g", "namespace": "default"},
            "spec": {"minMember": 2},
        }
    )
    harness.put(make_pod("m0", cores=100, labels={GROUP: "g"}))
    harness.put(make_pod("plain", cores=50))
    _watched(daemon, "m0", "plain")
    harness.server.inject("GET", r"/podgroups/g", delay=2.0, times=1)
    gang_reply: dict[str, object] = {}

    def gang_filter() -> None:
        gang_reply.update(Wire(daemon.port).filter(harness.pod("m0"), ["n1"]))

    def reads() -> int:
        return sum(1 for r in harness.server.requests if "/podgroups/g" in r.path)

    before = reads()
    slow = threading.Thread(target=gang_filter)
    slow.start()
    # The gang's filter is in, waiting on the PodGroup: the server records a request before
    # it delays the answer.
    wait_until(lambda: reads() > before, what="the gang's PodGroup read")
    started = time.monotonic()
    plain = Wire(daemon.port).filter(harness.pod("plain"), ["n1"])
    took = time.monotonic() - started
    slow.join()
    assert plain["NodeNames"] == ["n1"]
    assert took < 1.0, f"a plain filter waited {took:.2f} s behind a PodGroup read"
    assert "not found" not in str(gang_reply.get("Error", "")), gang_reply
    assert any("/podgroups/g" in r.path for r in harness.server.requests)
