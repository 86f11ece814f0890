"""The DRA driver's CDI hook program (`vgpu-core/hook/vgpu-cdi-hook.c`), built by
`hack/build-interposer.sh` as the image builds it, plain and under ASan+UBSan, run as the
container runtime runs a `createRuntime` hook (the OCI state on stdin, argv from the CDI spec)
against the driver's own socket server (`vgpu.adapters.hook_socket`).

It must fail closed: exit 0 only on the driver's "ok"; a refusal, no driver, a driver that
does not answer in time, or a state it cannot send makes it exit non-zero with the cause on
stderr, which the runtime turns into a failed container creation."""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.isolation.conftest import Build
from vgpu.adapters.hook_socket import HookSocket

CLAIM = "5f1e2d3c-0000-4000-8000-00000000c1a1"
STATE = json.dumps({"ociVersion": "1.2.0", "id": "c", "pid": 7, "annotations": {}}).encode()


class Driver:
    """The driver's socket with a given answer, recording what it was sent."""

    def __init__(self, path: Path) -> None:
        self.path, self.requests = path, list[bytes]()
        self.reply: Callable[[bytes], str] = lambda data: "ok"
        self.socket = HookSocket(path, self._answer)

    def _answer(self, data: bytes) -> str:
        self.requests.append(data)
        return self.reply(data)


@pytest.fixture
def driver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Driver]:
    server = Driver(Path(tmp_path_factory.mktemp("hk", numbered=True)) / "hook.sock")
    server.socket.start()
    try:
        yield server
    finally:
        server.socket.stop()


def run_hook(
    build: Build, socket: Path, *args: str, stdin: bytes = STATE
) -> subprocess.CompletedProcess[bytes]:
    program = build.library.parent / "vgpu-cdi-hook"
    argv = [str(program), str(socket), *(args or (CLAIM,))]
    return subprocess.run(argv, input=stdin, capture_output=True, timeout=30)


def test_the_hook_sends_the_claim_and_the_state_and_exits_0_on_ok(
    build: Build, driver: Driver
) -> None:
    done = run_hook(build, driver.path)
    assert (done.returncode, done.stderr) == (0, b"")
    assert driver.requests == [CLAIM.encode() + b"\n" + STATE]


def test_a_refusal_fails_the_hook_with_the_drivers_cause_on_stderr(
    build: Build, driver: Driver
) -> None:
    driver.reply = lambda data: "claim default/c1 is not reserved for pod default/s"
    done = run_hook(build, driver.path)
    assert done.returncode == 1
    assert b"claim default/c1 is not reserved for pod default/s" in done.stderr


def test_without_the_driver_the_hook_fails(build: Build, tmp_path: Path) -> None:
    done = run_hook(build, tmp_path / "gone.sock")
    assert done.returncode == 1
    assert b"cannot reach the vgpu DRA driver" in done.stderr


def test_a_driver_that_does_not_answer_in_time_fails_the_hook(build: Build, driver: Driver) -> None:
    release = threading.Event()
    driver.reply = lambda data: "ok" if release.wait(10) else "late"
    try:
        done = run_hook(build, driver.path, CLAIM, "300")
    finally:
        release.set()
    assert done.returncode == 1
    assert b"no answer from the vgpu DRA driver" in done.stderr and b"300 ms" in done.stderr


def test_a_state_over_the_bound_is_refused_before_the_driver_is_asked(
    build: Build, driver: Driver
) -> None:
    done = run_hook(build, driver.path, stdin=b" " * (64 * 1024 + 1))
    assert done.returncode == 1 and b"larger than 64 KiB" in done.stderr
    assert driver.requests == []


@pytest.mark.parametrize(
    ("args", "cause"),
    [
        ((), b"usage"),
        (("NOT-A-UID",), b"not a claim UID"),
        ((CLAIM, "0"), b"TIMEOUT_MS must be"),
        ((CLAIM, "5s"), b"TIMEOUT_MS must be"),
    ],
)
def test_bad_arguments_fail_the_hook_naming_them(
    build: Build, driver: Driver, args: tuple[str, ...], cause: bytes
) -> None:
    program = build.library.parent / "vgpu-cdi-hook"
    argv = [str(program), *([str(driver.path), *args] if args else [])]
    done = subprocess.run(argv, input=STATE, capture_output=True, timeout=30)
    assert done.returncode == 1 and cause in done.stderr
    assert driver.requests == []


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(state=st.binary(max_size=64 * 1024), answer=st.text(max_size=300))
def test_any_state_reaches_the_driver_whole_and_only_ok_passes(
    build: Build, driver: Driver, state: bytes, answer: str
) -> None:
    driver.requests.clear()
    driver.reply = lambda data: answer
    done = run_hook(build, driver.path, stdin=state)
    assert driver.requests == [CLAIM.encode() + b"\n" + state]
    assert (done.returncode == 0) == (answer == "ok")
