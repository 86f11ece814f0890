"""Every process of a container can write its shared state (it must, to account), so the library
treats what it reads there as untrusted: a budget or a refill time no library wrote neither
aborts a process on a signed overflow (the sanitized build traps it) nor stalls its launches."""

from __future__ import annotations

import mmap
import struct
import subprocess
from pathlib import Path

import pytest

from tests.isolation.conftest import ROOT, Cluster
from vgpu.node.shared_bound import STATE_BYTES

LAYOUT = r"""
#include <stddef.h>
#include <stdio.h>
#include "region.h"
int main(void)
{
    printf("%zu %zu %zu\n", offsetof(vgpu_region, next_refill_ns),
           offsetof(vgpu_region, dev[0].budget_ns), sizeof(vgpu_region));
    return 0;
}
"""
INT64_MAX = (1 << 63) - 1
UINT64_MAX = (1 << 64) - 1


@pytest.fixture(scope="module")
def offsets(tmp_path_factory: pytest.TempPathFactory) -> dict[str, int]:
    """Where the refill time and GPU 0's budget lie in `state`, and its size, as the library's
    header says."""
    d = tmp_path_factory.mktemp("layout")
    (d / "layout.c").write_text(LAYOUT)
    src = ROOT / "vgpu-core" / "src"
    subprocess.run(["cc", "-I", str(src), "-o", str(d / "layout"), str(d / "layout.c")], check=True)
    refill, budget, size = subprocess.run(
        [str(d / "layout")], capture_output=True, text=True, check=True
    ).stdout.split()
    return {"next_refill_ns": int(refill), "budget_ns": int(budget), "size": int(size)}


def forge(state: Path, offset: int, fmt: str, value: int) -> None:
    with state.open("r+b") as f, mmap.mmap(f.fileno(), 0) as m:
        struct.pack_into(fmt, m, offset, value)


@pytest.mark.parametrize(
    ("field", "fmt", "value"),
    [("budget_ns", "=q", INT64_MAX), ("next_refill_ns", "=Q", UINT64_MAX)],
    ids=["budget-at-int64-max", "refill-time-at-uint64-max"],
)
def test_a_forged_budget_or_refill_time_neither_traps_nor_stalls_launches(
    cluster: Cluster, offsets: dict[str, int], field: str, fmt: str, value: int
) -> None:
    container = cluster.admit([(0, 30, 256)])
    assert cluster.cuload(container, "info").returncode == 0  # creates the shared state
    forge(container.shared_dir / "state", offsets[field], fmt, value)
    spin = cluster.sandbox.popen(
        container, [str(cluster.build.cuload), "spin", "0", "0.3", "2000", "kernel"]
    )
    try:
        out, err = spin.communicate(timeout=20)  # 0.3 s of launches at 30 %: about one second
    except subprocess.TimeoutExpired:
        spin.kill()
        spin.communicate()
        pytest.fail(f"launches stalled after {field} was forged to {value}")
    assert spin.returncode == 0 and "runtime error" not in err, out + err


def test_a_state_file_of_another_layout_fails_closed_and_is_left_as_it_is(
    cluster: Cluster, offsets: dict[str, int]
) -> None:
    """Of the same size but another magic (another version of the library, whose processes may
    still use it): initialising it would wipe their counts and their mutex under them."""
    container = cluster.admit([(0, 30, 256)])
    foreign = b"VGPUREG0" + bytes(range(256)) * (offsets["size"] // 256)
    (container.shared_dir / "state").write_bytes(foreign[: offsets["size"]])
    done = cluster.cuload(container, "info")
    assert done.stdout.strip() == "cuInit 800", done.stdout
    lines = [line for line in done.stderr.splitlines() if line]
    assert len(lines) == 1 and "/run/vgpu-shared/state" in lines[0], lines
    assert "unknown layout" in lines[0], lines
    assert (container.shared_dir / "state").read_bytes() == foreign[: offsets["size"]]


def test_the_agent_cuts_state_back_to_the_librarys_layout_not_below(
    offsets: dict[str, int],
) -> None:
    """The agent cuts a grown `state` back to `STATE_BYTES` (vgpu/node/shared_bound.py); below
    the library's layout it would take the region from under running processes."""
    assert offsets["size"] == STATE_BYTES
