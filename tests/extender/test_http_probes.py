"""Kubelet probes have a plain-HTTP port of their own (`--probe-port`), served on
its own loop, so clients misbehaving on the verbs' port cannot starve them."""

from __future__ import annotations

import http.client
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.extender.builders import make_node
from tests.extender.conftest import Harness
from tests.extender.h2client import H2Client, tls_socket
from vgpu.cli.main import main
from vgpu.extender.server.tls import TlsFiles


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as held:
        held.bind(("0.0.0.0", 0))
        held.listen()
        yield int(held.getsockname()[1])


def _get(port: int, path: str) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", path)
        reply = conn.getresponse()
        return reply.status, reply.read()
    finally:
        conn.close()


def test_the_daemon_answers_probes_on_their_own_plain_http_port(
    harness: Harness, certs: Path
) -> None:
    harness.put(make_node("n1"))
    files = TlsFiles(
        str(certs / "extender.crt"), str(certs / "extender.key"), str(certs / "client-ca.crt")
    )
    daemon = harness.start(tls=files, probe_port=0)
    assert daemon.probe_port is not None and daemon.probe_port != daemon.port
    assert _get(daemon.probe_port, "/readyz") == (200, b"ok\n")
    assert _get(daemon.probe_port, "/healthz") == (200, b"ok\n")
    assert _get(daemon.probe_port, "/metrics")[0] == 404  # the main port's, with the verbs
    client = H2Client(tls_socket(daemon.port, certs, certs, ["h2"]))
    (health,) = client.wait(client.request("GET", "/healthz"))  # the main port still has them
    assert health.status == 200


def test_without_a_probe_port_only_the_main_port_serves(harness: Harness) -> None:
    harness.put(make_node("n1"))
    daemon = harness.start()
    assert daemon.probe_port is None


def test_a_probe_port_in_use_is_one_clear_line(
    busy_port: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config"
    config.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: k, cluster: {server: 'http://127.0.0.1:1'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: k, user: u}}]\n"
    )
    argv = ["extender", "--kubeconfig", str(config), "--insecure-http", "--no-leader-elect"]
    argv += ["--port", "0", "--probe-port", str(busy_port), "--insecure-development-key"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert f"--probe-port: cannot listen on 0.0.0.0:{busy_port}" in err
    assert "Traceback" not in err and len(err.splitlines()) <= 2
