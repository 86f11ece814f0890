"""How much of a connection h2 parses at a time: h2 parses every frame it is handed before any
is checked against a budget, so a flood of small frames is read 512 bytes at a time (at most ~60
frames between two checks, where 16 KiB of PINGs held the loop, and every filter behind it, for
tens to hundreds of milliseconds), while a verified client's few, large frames are read in
chunks doubling to 16 KiB. The real server over real TLS; verbs stubbed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from h2.connection import H2Connection

from tests.extender.h2client import H2Client, tls_socket
from tests.extender.test_http2_limits import _Routes, _served
from vgpu.extender.server.http1 import HttpServer
from vgpu.extender.server.limits import HttpLimits

LIMITS = HttpLimits(read_timeout=2.0, idle_timeout=5.0, workers=2)


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The size of every chunk the server hands h2 (the client's own are not counted)."""
    sizes: list[int] = []
    receive = H2Connection.receive_data

    def counted(self: H2Connection, data: bytes) -> Any:
        if not self.config.client_side:
            sizes.append(len(data))
        return receive(self, data)

    monkeypatch.setattr(H2Connection, "receive_data", counted)
    return sizes


@pytest.fixture
def served(certs: Path) -> Iterator[tuple[HttpServer, _Routes, list[str]]]:
    yield from _served(certs, LIMITS)


def _flood(client: H2Client, frames: int) -> None:
    for i in range(frames):
        client.h2.ping(i.to_bytes(8, "big"))
    client.flush()
    client.sock.settimeout(5)
    while client.terminated is None and client.read_once():
        pass


@pytest.mark.parametrize("verified", [True, False])
def test_a_flood_of_small_frames_is_parsed_512_bytes_at_a_time(
    served: tuple[HttpServer, _Routes, list[str]], certs: Path, reads: list[int], verified: bool
) -> None:
    client = H2Client(tls_socket(served[0].port, certs, certs if verified else None, ["h2"]))
    _flood(client, 3000)  # 51 KB in one write
    assert "flood-control" in served[2] or not verified  # a stranger's connection ends sooner still
    assert reads and max(reads) <= 512, reads
    assert sum(reads) < 8192, sum(reads)  # the rest of the flood is never parsed


def test_a_verified_client_s_large_frames_are_read_in_growing_chunks(
    served: tuple[HttpServer, _Routes, list[str]], certs: Path, reads: list[int]
) -> None:
    client = H2Client(tls_socket(served[0].port, certs, certs, ["h2"]))
    body = b"x" * 200_000
    (reply,) = client.wait(client.request("POST", "/scheduler/echo", body))
    assert reply.status == 200 and bytes(reply.body) == body
    assert max(reads) == 16384, reads
    assert len(reads) < 40, len(reads)  # 200 KB in about 13 reads of 16 KiB, after the first


def test_a_connection_yields_the_loop_between_two_reads(
    served: tuple[HttpServer, _Routes, list[str]],
    certs: Path,
    reads: list[int],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The TLS layer hands a whole socket's worth to the stream at once, so reads of a flood
    come from a buffer without waiting: each read must still be a turn of the loop of its own,
    or one connection's flood holds every filter behind it."""
    server = served[0]
    loop = server._loop
    turns, seen = [0], list[int]()

    def tick() -> None:
        turns[0] += 1
        if turns[0] < 1_000_000:
            loop.call_soon(tick)

    receive = H2Connection.receive_data

    def counted(self: H2Connection, data: bytes) -> Any:
        if not self.config.client_side:
            seen.append(turns[0])
        return receive(self, data)

    monkeypatch.setattr(H2Connection, "receive_data", counted)
    client = H2Client(tls_socket(server.port, certs, certs, ["h2"]))
    loop.call_soon_threadsafe(tick)
    _flood(client, 3000)
    turns[0] = 1_000_000  # stop ticking
    assert len(seen) > 3, seen
    assert len(set(seen)) == len(seen), seen  # never two reads in one turn
