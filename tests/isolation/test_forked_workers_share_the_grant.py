"""Workers forked by a process that loaded the grant are accounted each on its own: a forked child
inherits its parent's descriptor of the shared state, whose lock is the parent's slot, so each
worker takes a slot through a descriptor of its own, and gives it back when it exits."""

from __future__ import annotations

from tests.isolation.conftest import MIB, Cluster

PROGRAM = ["python3", "-m", "tests.isolation.programs.forked_workers", str(600 * MIB)]


def test_forked_workers_share_the_grant_and_an_exited_workers_memory_comes_back(
    cluster: Cluster,
) -> None:
    container = cluster.admit([(0, 30, 1024)])
    steps = ["alloc:0", "alloc:1", "exit:0", "alloc:1"]
    done = cluster.sandbox.run(container, [*PROGRAM, *steps])
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines() == [
        "nvmlInit_v2 0",
        "worker 0 rc 0",
        "worker 1 rc 2",  # 600 + 600 MiB > 1 GiB: the workers share the grant
        "worker 1 rc 0",  # worker 0 exited: its 600 MiB came back
    ], done.stdout + done.stderr
