"""Two extender replicas behind a Service stand-in: the leader is killed in the middle of a gang;
the follower takes over, kube-scheduler's calls reach it, and the gang is bound whole, each GPU
once."""

from __future__ import annotations

import signal
import time

import pytest

from tests.realk8s import pods
from tests.realk8s.cluster import RealCluster
from tests.realk8s.grants import granted
from tests.realk8s.processes import wait_until
from tests.realk8s.proxy import ServiceProxy
from tests.realk8s.test_workloads import gang

pytestmark = pytest.mark.realk8s


def test_leader_killed_mid_gang_follower_binds_it_whole(
    two_replicas: tuple[RealCluster, ServiceProxy],
) -> None:
    cluster, proxy = two_replicas
    api = cluster.admin
    leader = cluster.extender_leader()
    assert leader == "extender-0"
    members = gang("failover", 4)
    for member in members[:3]:  # part of the gang: the leader reserves, nothing binds yet
        api.post(pods.PODS, member)
    time.sleep(2)
    assert not any(pods.node_of(api, m["metadata"]["name"]) for m in members[:3])
    cluster.procs.stop(leader, sig=signal.SIGKILL, grace=0)
    killed = time.monotonic()
    for member in members[3:]:
        api.post(pods.PODS, member)
    wait_until(lambda: cluster.extender_leader() == "extender-1", 60, "extender-1 to lead")
    names = [str(m["metadata"]["name"]) for m in members]
    for name in names:
        pods.wait_running(api, name, timeout=120)
    print(
        f"leader killed -> gang running after {time.monotonic() - killed:.1f}s; "
        f"connections routed per replica port: {proxy.routed}"
    )
    gpus = [granted(pods.get(api, n))["tf"]["GPUS"] for n in names if "worker" in n]
    assert len(set(gpus)) == 4, f"a GPU was granted twice: {gpus}"
