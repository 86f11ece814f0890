"""Only kube-scheduler talks to the extender: real HTTPS with certificates made by
hack/make-extender-certs.sh, as an operator makes them."""

from __future__ import annotations

import argparse
import http.client
import json
import logging
import socket
import ssl
import subprocess
from pathlib import Path

import pytest

from tests.extender.builders import make_node, make_pod
from tests.extender.conftest import Harness
from vgpu.core.errors import ConfigError
from vgpu.daemons.extender import cli
from vgpu.extender.server.tls import TlsFiles

SCRIPT = Path(__file__).resolve().parents[2] / "hack" / "make-extender-certs.sh"


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two independent sets: the cluster's, and an attacker's own CA and certificates."""
    sets = []
    for name in ("cluster", "other"):
        out = tmp_path_factory.mktemp(name)
        subprocess.run([str(SCRIPT), str(out), "--days", "2"], check=True, capture_output=True)
        sets.append(out)
    assert not list(sets[0].glob("*-ca.key")), "CA keys are deleted by default"
    return sets[0], sets[1]


def _files(d: Path) -> TlsFiles:
    return TlsFiles(str(d / "extender.crt"), str(d / "extender.key"), str(d / "client-ca.crt"))


def _client(port: int, trust: Path, cert: Path | None) -> http.client.HTTPSConnection:
    context = ssl.create_default_context(cafile=str(trust / "server-ca.crt"))
    if cert is not None:
        context.load_cert_chain(str(cert / "scheduler.crt"), str(cert / "scheduler.key"))
    return http.client.HTTPSConnection("localhost", port, context=context, timeout=10)


def _post(conn: http.client.HTTPConnection, verb: str, doc: object) -> tuple[int, bytes]:
    conn.request(
        "POST", f"/scheduler/{verb}", json.dumps(doc), {"Content-Type": "application/json"}
    )
    resp = conn.getresponse()
    return resp.status, resp.read()


def _filter(pod: dict[str, object]) -> dict[str, object]:
    return {"Pod": pod, "Nodes": None, "NodeNames": ["n1"]}


def test_kube_schedulers_certificate_is_served(harness: Harness, certs: tuple[Path, Path]) -> None:
    cluster, _ = certs
    harness.put(make_node("n1"))
    daemon = harness.start(tls=_files(cluster))
    conn = _client(daemon.port, cluster, cluster)
    status, body = _post(conn, "filter", _filter(harness.shown(make_pod("p", cores=10))))
    assert status == 200 and json.loads(body)["NodeNames"] == ["n1"]
    status, _ = _post(conn, "filter", _filter(harness.shown(make_pod("q", cores=10))))  # kept alive
    assert status == 200


def test_a_client_without_a_certificate_gets_no_verb(
    harness: Harness, certs: tuple[Path, Path]
) -> None:
    cluster, _ = certs
    harness.put(make_node("n1"))
    harness.put(make_pod("victim", cores=10))
    daemon = harness.start(tls=_files(cluster))
    conn = _client(daemon.port, cluster, None)
    victim = harness.pod("victim")["metadata"]
    bind = {"PodName": "victim", "PodNamespace": "default", "PodUID": victim["uid"], "Node": "n1"}
    for verb, doc in (("filter", _filter(make_pod("p", cores=10))), ("bind", bind)):
        status, body = _post(conn, verb, doc)
        assert status == 403 and b"client certificate" in body
    assert "nodeName" not in harness.pod("victim")["spec"]
    metrics = daemon.metrics.exposition()
    assert b'vgpu_extender_refused_requests_total{reason="no-client-certificate"} 2.0' in metrics
    conn.request("GET", "/healthz")  # kubelet probes send no certificate
    assert conn.getresponse().read() == b"ok\n"


def test_a_certificate_from_another_ca_is_refused_at_the_handshake(
    harness: Harness, certs: tuple[Path, Path]
) -> None:
    cluster, other = certs
    harness.put(make_node("n1"))
    daemon = harness.start(tls=_files(cluster))
    conn = _client(daemon.port, cluster, other)
    with pytest.raises((ssl.SSLError, ConnectionError)):
        _post(conn, "filter", _filter(make_pod("p", cores=10)))
    plain = http.client.HTTPConnection("127.0.0.1", daemon.port, timeout=10)
    with pytest.raises((http.client.HTTPException, ConnectionError)):
        _post(plain, "filter", _filter(make_pod("p", cores=10)))
    assert _post(_client(daemon.port, cluster, cluster), "filter", _filter(make_pod("q")))[0] == 200


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    cli.add_parser(parser.add_subparsers())
    return parser.parse_args(["extender", *argv])


def test_the_command_needs_certificates_or_an_explicit_insecure_flag(
    certs: tuple[Path, Path], caplog: pytest.LogCaptureFixture
) -> None:
    cluster, _ = certs
    with pytest.raises(ConfigError, match="--insecure-http"):
        cli._tls(_args())
    with pytest.raises(ConfigError, match="--client-ca"):
        cli._tls(_args("--tls-cert", "a", "--tls-key", "b"))
    files = _files(cluster)
    chosen = cli._tls(
        _args("--tls-cert", files.cert, "--tls-key", files.key, "--client-ca", files.client_ca)
    )
    assert chosen == files
    with caplog.at_level(logging.WARNING, logger="vgpu"):
        assert cli._tls(_args("--insecure-http")) is None
    assert "plain HTTP" in caplog.text
    with pytest.raises(SystemExit):
        _args("--allow-pod-policy", "no-such-policy")
    allowed = _args("--allow-pod-policy", "binpack", "--allow-pod-policy", "spread")
    assert [spec.name for spec in allowed.allow_pod_policy] == ["binpack", "spread"]


def test_over_https_ghosts_poison_and_slow_clients_change_nothing(
    harness: Harness, certs: tuple[Path, Path]
) -> None:
    cluster, _ = certs
    harness.put(make_node("n1", cpu="32"))
    daemon = harness.start(tls=_files(cluster))
    stalled = [socket.create_connection(("127.0.0.1", daemon.port)) for _ in range(200)]
    half = []
    for _ in range(20):  # handshake done, then half a request
        conn = _client(daemon.port, cluster, cluster)
        conn.connect()
        assert conn.sock is not None
        conn.sock.sendall(b"POST /scheduler/filter HTTP/1.1\r\nContent-Length: 999\r\n\r\n{")
        half.append(conn)
    try:
        conn = _client(daemon.port, cluster, cluster)
        ghost = make_pod("ghost", cpu="32")
        ghost["metadata"].update(uid="g", resourceVersion="1")
        ghost["spec"]["nodeName"] = "n1"
        assert _post(conn, "filter", _filter(ghost))[0] == 200
        poison = harness.shown(make_pod("poison", cpu="1e10000000"))
        status, body = _post(conn, "filter", _filter(poison))
        assert status == 200 and b"requests.cpu" in body
        assert daemon.cache.ledger.holdings() == []
        status, body = _post(conn, "filter", _filter(harness.shown(make_pod("real", cpu="32"))))
        assert json.loads(body)["NodeNames"] == ["n1"]
    finally:
        for sock in stalled:
            sock.close()
        for half_open in half:
            half_open.close()


def test_clients_without_a_certificate_send_no_body_and_cannot_crowd_the_scheduler_out(
    harness: Harness, certs: tuple[Path, Path]
) -> None:
    cluster, _ = certs
    harness.put(make_node("n1"))
    daemon = harness.start(tls=_files(cluster))
    context = ssl.create_default_context(cafile=str(cluster / "server-ca.crt"))
    anonymous = []
    try:
        for _ in range(100):  # handshakes without a certificate, then idle
            raw = socket.create_connection(("127.0.0.1", daemon.port), timeout=5)
            anonymous.append(context.wrap_socket(raw, server_hostname="localhost"))
        first = anonymous[0]
        first.sendall(b"POST /scheduler/bind HTTP/1.1\r\nContent-Length: 60000000\r\n\r\n")
        assert first.recv(4096).startswith(b"HTTP/1.1 403")  # at once: no body is awaited
        anonymous[1].sendall(b"GET /healthz HTTP/1.1\r\nContent-Length: 60000000\r\n\r\n")
        assert anonymous[1].recv(4096).startswith(b"HTTP/1.1 403")
        anonymous[2].sendall(b"GET /healthz HTTP/1.1\r\n\r\n")
        assert anonymous[2].recv(4096).startswith(b"HTTP/1.1 200")
        conn = _client(daemon.port, cluster, cluster)
        status, body = _post(conn, "filter", _filter(harness.shown(make_pod("p", cores=10))))
        assert status == 200 and json.loads(body)["NodeNames"] == ["n1"]
    finally:
        for sock in anonymous:
            sock.close()
    assert b'reason="too-many-connections"' in daemon.metrics.exposition()


def test_renewed_certificates_take_effect_without_a_restart(
    harness: Harness, certs: tuple[Path, Path], tmp_path: Path
) -> None:
    import shutil

    cluster, renewed = certs
    for name in ("extender.crt", "extender.key", "client-ca.crt"):
        shutil.copy(cluster / name, tmp_path / name)
    harness.put(make_node("n1"))
    daemon = harness.start(tls=_files(tmp_path))
    assert daemon.tls_reloader is not None and not daemon.tls_reloader.check()
    with pytest.raises((ssl.SSLError, ConnectionError)):
        _post(_client(daemon.port, renewed, renewed), "filter", _filter(make_pod("p")))
    for name in ("extender.crt", "extender.key", "client-ca.crt"):  # as a Secret update does
        shutil.copy(renewed / name, tmp_path / f".{name}")
        (tmp_path / f".{name}").replace(tmp_path / name)
    assert daemon.tls_reloader.check()
    status, _ = _post(_client(daemon.port, renewed, renewed), "filter", _filter(make_pod("q")))
    assert status == 200


def test_policy_flags_take_the_same_specs() -> None:
    """`--policy` and `--allow-pod-policy` read one grammar: a name or `name:key=value,...`."""
    args = _args("--insecure-http", "--policy", "default:online=false")
    assert args.policy.base == "default" and args.policy.config is not None
    assert args.policy == _args("--allow-pod-policy", "default:online=false").allow_pod_policy[0]
    for bad in ("tetris", "default:no_such_knob=1"):
        with pytest.raises(SystemExit):
            _args("--policy", bad)
