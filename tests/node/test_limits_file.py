"""The limits file the agent writes for vgpu-core: the round trip, the contract's bounds on every
rendered file, refusal of what the library refuses, and an atomic replace."""

from __future__ import annotations

import os
import re
import threading
import uuid
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vgpu.adapters.container_dirs import read_limits, write_limits
from vgpu.core.contention import SCALE_MAX, SCALE_NEUTRAL
from vgpu.node.limits_file import (
    ACTIVITY_BYTES,
    HEADER,
    LIMITS_NAME,
    MAX_DEVICES,
    MAX_LIMITS_BYTES,
    DeviceLimit,
    LimitsError,
    parse_activity,
    parse_limits,
    render_activity,
    render_limits,
)

LINE = re.compile(
    r"device (GPU|MIG)-[0-9a-f-]{36} memory=[1-9][0-9]* cores=([0-9]+) limit=([0-9]+) "
    r"allowance=([0-9]+)( scale=[1-9][0-9]*)?"
)


@st.composite
def device(draw: st.DrawFn) -> DeviceLimit:
    cores = draw(st.integers(1, 100))
    limit = draw(st.integers(cores, 100))
    prefix = draw(st.sampled_from(["GPU", "MIG"]))
    return DeviceLimit(
        f"{prefix}-{uuid.UUID(int=draw(st.integers(0, 2**128 - 1)))}",
        draw(st.integers(1, 2**63 - 1)),
        cores,
        limit,
        draw(st.integers(cores, limit)),
        draw(st.one_of(st.just(SCALE_NEUTRAL), st.integers(SCALE_NEUTRAL, SCALE_MAX))),
    )


devices = st.lists(device(), min_size=1, max_size=MAX_DEVICES, unique_by=lambda d: d.uuid)


@given(devices)
def test_a_rendered_file_parses_back_to_the_same_devices(ds: list[DeviceLimit]) -> None:
    assert parse_limits(render_limits(ds)) == tuple(ds)


@given(devices)
def test_every_rendered_file_obeys_the_contract_bounds(ds: list[DeviceLimit]) -> None:
    text = render_limits(ds)
    assert text.isascii() and len(text) <= MAX_LIMITS_BYTES and text.endswith("\n")
    first, *rest = text[:-1].split("\n")
    assert first == HEADER and 1 <= len(rest) <= MAX_DEVICES
    for line in rest:
        m = LINE.fullmatch(line)
        assert m is not None, line
        cores, limit, allowance = (int(g) for g in m.groups()[1:4])
        assert 1 <= cores <= allowance <= limit <= 100


@given(devices, st.data())
def test_values_out_of_the_contract_are_refused_when_rendering(
    ds: list[DeviceLimit], data: st.DataObject
) -> None:
    n = data.draw(st.integers(0, len(ds) - 1))
    d = ds[n]
    bad = data.draw(
        st.sampled_from(
            [
                DeviceLimit("GPU-1", d.memory, d.cores, d.limit, d.allowance),
                DeviceLimit(d.uuid, 0, d.cores, d.limit, d.allowance),
                DeviceLimit(d.uuid, d.memory, 0, d.limit, d.allowance),
                DeviceLimit(d.uuid, d.memory, d.cores, 101, d.allowance),
                DeviceLimit(d.uuid, d.memory, d.cores, d.limit, d.limit + 1),
                DeviceLimit(d.uuid, d.memory, d.cores, d.limit, d.cores - 1),
            ]
        )
    )
    with pytest.raises(LimitsError, match=f"device {n}"):
        render_limits([*ds[:n], bad, *ds[n + 1 :]])


def test_no_device_too_many_or_a_duplicate_is_refused() -> None:
    d = DeviceLimit(f"GPU-{uuid.UUID(int=1)}", 1 << 30, 30, 60, 30)
    for ds in ([], [d, d], [DeviceLimit(f"GPU-{uuid.UUID(int=i)}", 1, 1, 1, 1) for i in range(17)]):
        with pytest.raises(LimitsError):
            render_limits(ds)


GOOD = f"{HEADER}\ndevice GPU-{uuid.UUID(int=7)} memory=4294967296 cores=30 limit=60 allowance=45\n"


@pytest.mark.parametrize(
    "text",
    [
        "",
        GOOD[:-1],  # no final newline
        GOOD + "\n",  # trailing data
        GOOD.replace("vgpu-limits 1", "vgpu-limits 2"),
        GOOD.replace("memory=", "mem="),
        GOOD.replace("=30", "=030"),
        GOOD.replace("=30", "=+30"),
        GOOD.replace(" cores", "  cores"),
        GOOD.replace("allowance=45", "allowance=61"),
        GOOD + GOOD.split("\n", 1)[1],  # the same UUID twice
        GOOD.replace("GPU-", "GPU_"),
        HEADER + "\n",
        GOOD.replace("4294967296", "9" * 21),
        GOOD.replace("allowance=45", "allowance=45 scale=999"),
        GOOD.replace("allowance=45", "allowance=45 scale=8001"),
        GOOD.replace("allowance=45", "allowance=45 scale=01000"),
        GOOD.replace("allowance=45", "allowance=45 scal=2000"),
        GOOD.replace("allowance=45", "allowance=45 scale=2000 scale=2000"),
    ],
)
def test_what_the_library_refuses_is_refused(text: str) -> None:
    with pytest.raises(LimitsError, match="limits"):
        parse_limits(text)


def test_the_file_is_replaced_atomically_and_read_back(tmp_path: Path) -> None:
    a = [DeviceLimit(f"GPU-{uuid.UUID(int=1)}", 1 << 30, 30, 60, 30)]
    b = [DeviceLimit(f"GPU-{uuid.UUID(int=1)}", 1 << 30, 30, 60, 60)]
    write_limits(tmp_path, a)
    seen: set[str] = set()
    stop = threading.Event()

    def reader() -> None:
        while not stop.is_set():
            seen.add((tmp_path / LIMITS_NAME).read_text())

    t = threading.Thread(target=reader)
    t.start()
    for n in range(200):
        write_limits(tmp_path, b if n % 2 else a)
    stop.set()
    t.join()
    assert seen <= {render_limits(a), render_limits(b)}
    assert read_limits(tmp_path) == tuple(b) and sorted(os.listdir(tmp_path)) == [LIMITS_NAME]


def test_a_missing_file_is_a_named_error(tmp_path: Path) -> None:
    with pytest.raises(LimitsError, match="limits in"):
        read_limits(tmp_path)


@given(st.lists(st.integers(0, 2**64 - 1), max_size=MAX_DEVICES))
def test_activity_round_trip(times: list[int]) -> None:
    data = render_activity(times)
    assert len(data) == ACTIVITY_BYTES
    assert parse_activity(data) == tuple(times + [0] * (MAX_DEVICES - len(times)))


@pytest.mark.parametrize("data", [b"", b"VGPUACT1", b"VGPUACT3" + bytes(128)])
def test_a_short_or_foreign_activity_file_is_refused(data: bytes) -> None:
    with pytest.raises(LimitsError, match="activity"):
        parse_activity(data)
