"""Both ends of the contract bound `memory` to 2^63-1 bytes: what the agent would refuse to
write, the library refuses to read, failing closed like any other bad field."""

from __future__ import annotations

import pytest

from tests.isolation.conftest import Cluster
from vgpu.node.limits_file import MAX_MEMORY_BYTES, LimitsError, parse_limits


def agent_accepts(text: str) -> bool:
    try:
        parse_limits(text)
    except LimitsError:
        return False
    return True


@pytest.mark.parametrize("memory", [MAX_MEMORY_BYTES, MAX_MEMORY_BYTES + 1, (1 << 64) - 1])
def test_the_library_accepts_memory_exactly_up_to_the_agents_bound(
    cluster: Cluster, memory: int
) -> None:
    container = cluster.admit([(0, 30, 512)])
    text = (
        f"vgpu-limits 1\ndevice {cluster.uuids[0]} memory={memory} cores=30 limit=30 allowance=30\n"
    )
    container.write_limits(text)
    done = cluster.cuload(container, "info")
    lines = [line for line in done.stderr.splitlines() if line]
    if agent_accepts(text):
        assert done.returncode == 0 and lines == [], done.stdout + done.stderr
        assert f"total {memory} " in done.stdout, done.stdout
    else:
        assert done.stdout.strip() == "cuInit 800", done.stdout
        assert len(lines) == 1, lines
        assert lines[0].startswith("vgpu-core: /run/vgpu/limits: line 2: memory"), lines
