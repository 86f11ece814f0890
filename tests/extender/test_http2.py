"""kube-scheduler's Go client negotiates HTTP/2 (ALPN "h2") and multiplexes every call on one
TLS connection: real TLS with certificates from hack/make-extender-certs.sh, a real HTTP/2
client (the `h2` library, client side), the daemon's real server."""

from __future__ import annotations

import http.client
import json
import ssl
from pathlib import Path

import pytest

from tests.extender.builders import make_node, make_pod
from tests.extender.conftest import Harness
from tests.extender.h2client import H2Client, tls_socket
from vgpu.daemons.extender.daemon import ExtenderDaemon
from vgpu.extender.server.tls import TlsFiles

JSON = {"Content-Type": "application/json"}


def files(d: Path) -> TlsFiles:
    return TlsFiles(str(d / "extender.crt"), str(d / "extender.key"), str(d / "client-ca.crt"))


def _h1(daemon: ExtenderDaemon, certs: Path, verb: str, doc: object) -> tuple[int, bytes]:
    """The same request over HTTP/1.1 (http.client offers no ALPN)."""
    context = ssl.create_default_context(cafile=str(certs / "server-ca.crt"))
    context.load_cert_chain(str(certs / "scheduler.crt"), str(certs / "scheduler.key"))
    conn = http.client.HTTPSConnection("localhost", daemon.port, context=context, timeout=10)
    conn.request("POST", f"/scheduler/{verb}", json.dumps(doc), JSON)
    resp = conn.getresponse()
    assert conn.sock.selected_alpn_protocol() in (None, "http/1.1")
    status, body = resp.status, resp.read()
    conn.close()
    return status, body


def _filter(pod: dict[str, object], names: list[str]) -> dict[str, object]:
    return {"Pod": pod, "Nodes": None, "NodeNames": names}


def _counted(daemon: ExtenderDaemon, line: bytes) -> bool:
    return line in daemon.metrics.exposition()


def test_every_verb_is_answered_concurrently_on_one_connection(
    harness: Harness, certs: Path
) -> None:
    for name in ("n1", "n2"):
        harness.put(make_node(name))
    harness.put(make_pod("bound", cores=30))
    daemon = harness.start(tls=files(certs))
    client = H2Client(tls_socket(daemon.port, certs, certs, ["h2", "http/1.1"]))
    pod = make_pod("p", cores=50)
    meta = harness.pod("bound")["metadata"]
    docs = {
        "filter": _filter(pod, ["n1", "n2", "gone"]),
        "prioritize": _filter(pod, ["n1", "n2"]),
        "bind": {
            "PodName": "bound",
            "PodNamespace": "default",
            "PodUID": meta["uid"],
            "Node": "n2",
        },
    }
    expected = {v: json.loads(_h1(daemon, certs, v, docs[v])[1]) for v in ("filter", "prioritize")}
    streams = {
        v: client.request("POST", f"/scheduler/{v}", json.dumps(d).encode())
        for v, d in docs.items()
    }
    replies = dict(zip(streams, client.wait(*streams.values()), strict=True))
    assert {r.status for r in replies.values()} == {200}
    assert replies["bind"].headers[b"content-type"] == b"application/json"
    assert json.loads(replies["bind"].body) == {"Error": ""}
    assert harness.pod("bound")["spec"]["nodeName"] == "n2"
    for verb in ("filter", "prioritize"):
        assert json.loads(replies[verb].body) == expected[verb]
    again = client.request("GET", "/metrics")
    (metrics,) = client.wait(again)
    assert metrics.status == 200 and b"vgpu_extender_connections_total" in metrics.body
    assert _counted(daemon, b"vgpu_extender_connections_total 3.0")  # 2 over HTTP/1.1, 1 over h2


def test_a_large_request_and_reply_pass_the_flow_control(harness: Harness, certs: Path) -> None:
    """5,000 node names up (~100 KB), a failure for each down, through a 4 KiB client window."""
    harness.put(make_node("n1"))
    daemon = harness.start(tls=files(certs))
    doc = _filter(harness.shown(make_pod("p", cores=10)), [f"node-{i:05d}" for i in range(5000)])
    body = json.dumps(doc).encode()
    client = H2Client(tls_socket(daemon.port, certs, certs, ["h2"]), window=4096)
    (reply,) = client.wait(client.request("POST", "/scheduler/filter", body))
    assert reply.status == 200 and len(reply.body) > 65535
    assert int(reply.headers[b"content-length"]) == len(reply.body)
    assert json.loads(reply.body) == json.loads(_h1(daemon, certs, "filter", doc)[1])
    assert len(json.loads(reply.body)["FailedNodes"]) == 5000


def test_a_client_without_a_certificate_gets_only_a_get(harness: Harness, certs: Path) -> None:
    harness.put(make_node("n1"))
    daemon = harness.start(tls=files(certs))
    probe = H2Client(tls_socket(daemon.port, certs, None, ["h2"]))
    (health,) = probe.wait(probe.request("GET", "/healthz"))
    assert (health.status, bytes(health.body)) == (200, b"ok\n")
    while probe.terminated is None and probe.read_once():
        pass
    assert probe.terminated is not None  # one request, then GOAWAY
    anonymous = H2Client(tls_socket(daemon.port, certs, None, ["h2"]))
    body = json.dumps(_filter(make_pod("p", cores=10), ["n1"])).encode()
    (refused,) = anonymous.wait(anonymous.request("POST", "/scheduler/filter", body))
    assert refused.status == 403 and b"client certificate" in refused.body
    assert _counted(
        daemon, b'vgpu_extender_refused_requests_total{reason="no-client-certificate"} 1.0'
    )


@pytest.mark.parametrize(
    ("garbage", "goaway"),
    [
        (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", False),  # HTTP/1.1 after choosing h2
        (
            b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00"
            b"\x00\x00\x01\x00\x00\x00\x00\x00\x00X",  # DATA on stream 0
            True,
        ),
    ],
)
def test_a_protocol_error_ends_only_that_connection(
    harness: Harness, certs: Path, garbage: bytes, goaway: bool
) -> None:
    harness.put(make_node("n1"))
    daemon = harness.start(tls=files(certs))
    sock = tls_socket(daemon.port, certs, certs, ["h2"])
    assert sock.selected_alpn_protocol() == "h2"
    sock.sendall(garbage)
    received = b""
    while chunk := sock.recv(65536):
        received += chunk
    # the connection ended (recv returned b""), after a GOAWAY frame (type 7) where h2 sends one
    assert (b"\x07\x00\x00\x00\x00\x00" in received) == goaway
    assert _counted(daemon, b'vgpu_extender_refused_requests_total{reason="malformed"} 1.0')
    client = H2Client(tls_socket(daemon.port, certs, certs, ["h2"]))
    (health,) = client.wait(client.request("GET", "/healthz"))
    assert health.status == 200


def test_http1_clients_are_served_on_the_same_port(harness: Harness, certs: Path) -> None:
    harness.put(make_node("n1"))
    daemon = harness.start(tls=files(certs))
    sock = tls_socket(daemon.port, certs, certs, ["http/1.1"])
    assert sock.selected_alpn_protocol() == "http/1.1"
    sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert sock.recv(65536).startswith(b"HTTP/1.1 200")


def test_stopping_sends_goaway(harness: Harness, certs: Path) -> None:
    harness.put(make_node("n1"))
    daemon = harness.start(tls=files(certs))
    client = H2Client(tls_socket(daemon.port, certs, certs, ["h2"]))
    (health,) = client.wait(client.request("GET", "/healthz"))
    assert health.status == 200
    daemon.stop()
    while client.terminated is None and client.read_once():
        pass
    assert client.terminated is not None
