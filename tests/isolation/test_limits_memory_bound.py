"""Both ends of the contract bound `memory` to 2^63-1 bytes: what the agent would refuse to
write, the library refuses to read, failing closed like any other bad field."""

from __future__ import annotations

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.isolation.conftest import Cluster
from vgpu.node.limits_file import MAX_MEMORY_BYTES, LimitsError, parse_limits

AROUND_THE_BOUNDS = st.one_of(
    st.integers(0, 1 << 10),
    st.integers(MAX_MEMORY_BYTES - (1 << 10), MAX_MEMORY_BYTES + (1 << 10)),
    st.integers((1 << 64) - (1 << 10), (1 << 64) + (1 << 10)),
    st.integers(0, 10**20),
)


def agent_accepts(text: str) -> bool:
    try:
        parse_limits(text)
    except LimitsError:
        return False
    return True


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(memory=AROUND_THE_BOUNDS)
@example(memory=MAX_MEMORY_BYTES)
@example(memory=MAX_MEMORY_BYTES + 1)
@example(memory=(1 << 64) - 1)
@example(memory=0)
def test_the_library_accepts_memory_exactly_where_the_agent_does(
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
