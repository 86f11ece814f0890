"""Every user of a container shares its grant: the shared state one process created (under the
usual umask 022) is usable by a process of another uid, as when a root entrypoint runs
`nvidia-smi` and then starts the application as an unprivileged user, or when two unprivileged
users take turns. The agent pre-creates the two shared files writable by every uid, and a
library that creates them itself (no agent) makes them so whatever the umask."""

from __future__ import annotations

import os
import stat

import pytest

from tests.isolation.conftest import MIB, Cluster
from tests.isolation.test_memory_grant import codes

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="running as another uid needs root")


def as_user(uid: int) -> list[str]:
    """Run as `uid`, without the capabilities that would let it write what it does not own. It
    keeps CAP_DAC_READ_SEARCH only to reach the test harness's 0700 directories (an image's
    programs and a node's libraries are world-readable); reading is all that capability grants."""
    if uid == 0:
        return []
    return [
        "setpriv",
        f"--reuid={uid}",
        f"--regid={uid}",
        "--clear-groups",
        "--inh-caps=-all,+dac_read_search",
        "--ambient-caps=+dac_read_search",
        "--bounding-set=-all,+dac_read_search",
    ]


@pytest.mark.parametrize(
    ("first", "second"), [(0, 65534), (65534, 1000)], ids=["root-then-user", "user-then-user"]
)
def test_a_second_uid_uses_cuda_after_another_created_the_state(
    cluster: Cluster, first: int, second: int
) -> None:
    container = cluster.admit([(0, 30, 1024)])
    cluster.node.dir.chmod(0o777)  # the simulated GPUs are any uid's, as /dev/nvidia* are
    cuload = str(cluster.build.cuload)
    created = cluster.sandbox.run(
        container, [*as_user(first), "sh", "-c", f"umask 022 && exec {cuload} info"]
    )
    assert created.returncode == 0, created.stdout + created.stderr
    for name in ("state", "activity"):  # the agent pre-creates them; the library keeps 0666
        path = container.shared_dir / name
        assert stat.S_IMODE(path.stat().st_mode) == 0o666, f"{name}: {path.stat().st_mode:o}"
    (cluster.node.dir / "state").chmod(0o666)
    used = cluster.sandbox.run(
        container, [*as_user(second), cuload, "alloc", "0", "mem", str(256 * MIB), "5"]
    )
    assert codes(used.stdout) == [0, 0, 0, 0, 2], used.stdout + used.stderr
