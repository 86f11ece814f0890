"""The DRA driver's socket for the CDI hook (`vgpu.adapters.hook_socket`) and the request it
reads (`vgpu.dra.hook_request`): a request is bounded in size and time, at most `max_clients`
are answered at once, and no input ends the server or escapes the reader as anything but a
refusal naming what is wrong."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vgpu.adapters.hook_socket import HookSocket
from vgpu.dra.hook_request import (
    MAX_REQUEST,
    SANDBOX_UID,
    BadRequest,
    HookRequest,
    parse_request,
    pod_uid_in_cgroup,
)

POD = "0a1b2c3d-0000-4000-8000-0000000000aa"


class Answers:
    """An answering function that records, can be made to block or raise."""

    def __init__(self) -> None:
        self.seen: list[bytes] = []
        self.gate = threading.Event()
        self.gate.set()
        self.raises = False
        self.entered = threading.Event()

    def __call__(self, data: bytes) -> str:
        self.seen.append(data)
        self.entered.set()
        if self.raises:
            raise RuntimeError("boom")
        return "ok" if self.gate.wait(10) else "gate"


@pytest.fixture
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[HookSocket, Answers]]:
    answers = Answers()
    server = HookSocket(
        tmp_path_factory.mktemp("hs") / "s.sock", answers, read_s=0.3, max_clients=1
    )
    server.start()
    try:
        yield server, answers
    finally:
        answers.gate.set()
        server.stop()


def connect(path: Path) -> socket.socket:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.settimeout(10)
    conn.connect(str(path))
    return conn


def exchange(path: Path, data: bytes, *, close: bool = True) -> str:
    """Send as the hook does; an answer sent before the request was read is read all the same."""
    with connect(path) as conn:
        try:
            conn.sendall(data)
            if close:
                conn.shutdown(socket.SHUT_WR)
        except BrokenPipeError:
            pass
        return b"".join(iter(lambda: conn.recv(4096), b"")).decode()


def test_the_socket_answers_what_the_function_answers_and_only_root_may_connect(
    served: tuple[HookSocket, Answers],
) -> None:
    server, answers = served
    assert exchange(server.path, b"abc\n{}") == "ok"
    assert answers.seen == [b"abc\n{}"]
    assert server.path.stat().st_mode & 0o777 == 0o600


def test_a_request_over_the_bound_is_refused_unread(served: tuple[HookSocket, Answers]) -> None:
    server, answers = served
    answer = exchange(server.path, b"x" * (MAX_REQUEST + 1))
    assert answer == f"the request is over the bound of {MAX_REQUEST} bytes"
    assert answers.seen == []


def test_a_request_never_finished_is_refused_after_the_time_bound(
    served: tuple[HookSocket, Answers],
) -> None:
    server, answers = served
    assert exchange(server.path, b"abc\n{", close=False) == "the request took longer than 0.3 s"
    assert answers.seen == []


def test_a_failing_answer_is_the_answer_and_the_server_goes_on(
    served: tuple[HookSocket, Answers],
) -> None:
    server, answers = served
    answers.raises = True
    assert "failed to answer: RuntimeError: boom" in exchange(server.path, b"a\n{}")
    answers.raises = False
    assert exchange(server.path, b"a\n{}") == "ok"


def test_past_max_clients_a_request_is_answered_busy_at_once(
    served: tuple[HookSocket, Answers],
) -> None:
    server, answers = served
    answers.gate.clear()
    first = connect(server.path)
    first.sendall(b"a\n{}")
    first.shutdown(socket.SHUT_WR)
    try:
        assert answers.entered.wait(10)  # the first holds the only slot until it is answered
        assert exchange(server.path, b"b\n{}").startswith("busy: 1 containers")
    finally:
        answers.gate.set()
        first.close()


def test_stopping_removes_the_socket(served: tuple[HookSocket, Answers]) -> None:
    server, _ = served
    server.stop()
    assert not server.path.exists()
    server.stop()


def test_a_request_names_the_claim_the_pod_and_the_process() -> None:
    state = {"pid": 42, "annotations": {SANDBOX_UID: POD, "io.kubernetes.cri.sandbox-name": "p"}}
    assert parse_request(b"c1a1-00\n" + json.dumps(state).encode()) == HookRequest(
        "c1a1-00", POD, "p", 42
    )


@pytest.mark.parametrize(
    ("data", "cause"),
    [
        (b"{}", "does not start with a claim UID line"),
        (b"UPPER\n{}", "does not start with a claim UID line"),
        (b"c1\n[]", "not a JSON object"),
        (b"c1\n{", "not JSON"),
        (b"c1\n" + b"[" * 100000, "over the bound"),
        (b"c1\n" + b"[" * 60000, "not JSON"),
        (b'c1\n{"pid": true}', "pid is not a process ID"),
        (b'c1\n{"pid": -3}', "pid is not a process ID"),
        (b'c1\n{"annotations": {"io.kubernetes.cri.sandbox-uid": "../x"}}', "not a pod UID"),
    ],
)
def test_a_bad_request_is_refused_naming_what_is_wrong(data: bytes, cause: str) -> None:
    with pytest.raises(BadRequest, match=cause):
        parse_request(data)


@pytest.mark.parametrize(
    "line",
    [
        f"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{POD.replace('-', '_')}.slice/cri-containerd-1.scope",
        f"0::/kubepods.slice/kubepods-pod{POD.replace('-', '_')}.slice/x.scope",
        f"0::/kubepods/besteffort/pod{POD}/0123abcd",
        f"0::/kubepods/pod{POD}",
    ],
)
def test_the_pod_is_read_from_a_containers_cgroup_in_either_layout(line: str) -> None:
    assert pod_uid_in_cgroup(f"1:name=systemd:/x\n{line}\n") == POD


def test_a_cgroup_outside_the_pods_names_no_pod() -> None:
    assert pod_uid_in_cgroup("0::/system.slice/containerd.service\n") is None


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=20,
)


@given(
    data=st.binary(max_size=2000)
    | st.builds(
        lambda head, body: head + b"\n" + json.dumps(body).encode(),
        st.sampled_from([b"c1", b"", b"\xff"]),
        st.dictionaries(st.sampled_from(["pid", "annotations", "id"]), _json),
    )
)
def test_any_bytes_are_a_request_or_a_refusal(data: bytes) -> None:
    try:
        request = parse_request(data)
    except BadRequest as e:
        assert str(e)
        return
    assert request.pid is None or request.pid > 0


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.binary(max_size=4096), close=st.booleans())
def test_the_server_answers_any_bytes_within_its_bound_and_goes_on(
    served: tuple[HookSocket, Answers], data: bytes, close: bool
) -> None:
    server, _ = served
    assert exchange(server.path, data, close=close)
    assert exchange(server.path, b"c\n{}") == "ok"
