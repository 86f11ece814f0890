"""Every user of a container shares its grant: the shared state a root process created (under the
usual umask 022) is usable by a process of another uid, as when a root entrypoint runs
`nvidia-smi` and then starts the application as an unprivileged user."""

from __future__ import annotations

import os
import stat

import pytest

from tests.isolation.conftest import MIB, Cluster
from tests.isolation.test_memory_grant import codes

# Another uid, without the capabilities that would let it write what it does not own. It keeps
# CAP_DAC_READ_SEARCH only to reach the test harness's 0700 directories (an image's programs
# and a node's libraries are world-readable); reading is all that capability grants.
NOBODY = [
    "setpriv",
    "--reuid=65534",
    "--regid=65534",
    "--clear-groups",
    "--inh-caps=-all,+dac_read_search",
    "--ambient-caps=+dac_read_search",
    "--bounding-set=-all,+dac_read_search",
]

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="running as another uid needs root")


def test_a_second_uid_uses_cuda_after_a_root_process_created_the_state(cluster: Cluster) -> None:
    container = cluster.admit([(0, 30, 1024)])
    cuload = str(cluster.build.cuload)
    first = cluster.sandbox.run(container, ["sh", "-c", f"umask 022 && exec {cuload} info"])
    assert first.returncode == 0, first.stderr
    (cluster.node.dir / "state").chmod(0o666)  # the simulated GPUs: any uid's, as /dev/nvidia*
    second = cluster.sandbox.run(
        container, [*NOBODY, cuload, "alloc", "0", "mem", str(256 * MIB), "5"]
    )
    assert codes(second.stdout) == [0, 0, 0, 0, 2], second.stdout + second.stderr
    for name in ("state", "activity"):
        mode = stat.S_IMODE((container.shared_dir / name).stat().st_mode)
        assert mode == 0o666, f"{name} is {mode:o}"
