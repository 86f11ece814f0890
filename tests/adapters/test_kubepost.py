"""The Binding's lean POST (`vgpu.adapters.kube.fast_post`): the client's credentials, one
kept-alive connection per thread, a closed one replaced before sending, errors as the client's."""

from __future__ import annotations

import json
import ssl
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client import ApiClient, Configuration

from tests.kubeapi import FakeApiServer
from vgpu.adapters.kube.calls import (
    KubeApi,
    KubeConflict,
    KubeForbidden,
    KubeInvalid,
    KubeUnavailable,
)
from vgpu.adapters.kube.credentials import load_configuration
from vgpu.adapters.kube.fast_post import LeanPoster

NS = "default"
KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{{name: c, cluster: {{server: "http://127.0.0.1:{port}"}}}}]
users: [{{name: u, user: {{token: t0ken}}}}]
contexts: [{{name: x, context: {{cluster: c, user: u}}}}]
current-context: x
"""


class _Recorder(BaseHTTPRequestHandler):
    """Answers every POST 201 and records (client port, Authorization, path, body); with
    `server.hang_up`, closes each connection after its reply without saying so."""

    protocol_version = "HTTP/1.1"
    server: Any

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        auth = self.headers.get("Authorization")
        self.server.seen.append((self.client_address[1], auth, self.path, body))
        reply = b'{"kind":"Status","status":"Success"}'
        self.send_response(201)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)
        self.close_connection = self.server.hang_up


class _Server(ThreadingHTTPServer):
    """Counts the connections it has closed (`closed`)."""

    closed = threading.Semaphore(0)

    def shutdown_request(self, request: Any) -> None:
        super().shutdown_request(request)
        self.closed.release()


@pytest.fixture
def recorder() -> Iterator[Any]:
    server: Any = _Server(("127.0.0.1", 0), _Recorder)
    server.seen, server.hang_up, server.closed = [], False, threading.Semaphore(0)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def tls_recorder(recorder: Any, tmp_path: Path) -> Iterator[tuple[Any, Path]]:
    """The recorder over TLS, requiring a client certificate from the set's client CA (the
    certificates of hack/make-extender-certs.sh stand in for a cluster's)."""
    script = Path(__file__).resolve().parents[2] / "hack" / "make-extender-certs.sh"
    subprocess.run([str(script), str(tmp_path), "--days", "1"], check=True, capture_output=True)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tmp_path / "extender.crt", tmp_path / "extender.key")
    context.load_verify_locations(tmp_path / "client-ca.crt")
    context.verify_mode = ssl.CERT_REQUIRED
    recorder.socket = context.wrap_socket(recorder.socket, server_side=True)
    yield recorder, tmp_path


@pytest.fixture
def kube(kube_client: Any) -> KubeApi:
    return KubeApi(kube_client)


def _api(port: int, **settings: Any) -> KubeApi:
    config = Configuration()
    config.host = f"http://127.0.0.1:{port}"
    config.retries = 0
    for name, value in settings.items():
        setattr(config, name, value)
    return KubeApi(ApiClient(config), request_timeout=2.0)


def test_binds_with_the_kubeconfig_token_on_one_kept_alive_connection(
    recorder: Any, tmp_path: Path
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        KUBECONFIG.format(port=recorder.server_address[1]),
    )
    api = KubeApi(ApiClient(load_configuration(str(kubeconfig))), request_timeout=2.0)
    for name in ("a", "b", "c"):
        api.bind_pod(NS, name, "n1", annotations={"k": "v"}, uid=f"uid-{name}")
    ports = {port for port, *_ in recorder.seen}
    assert len(ports) == 1
    _, auth, path, body = recorder.seen[-1]
    assert auth == "Bearer t0ken"
    assert path == "/api/v1/namespaces/default/pods/c/binding"
    assert body["metadata"] == {
        "name": "c",
        "namespace": NS,
        "annotations": {"k": "v"},
        "uid": "uid-c",
    }
    assert body["target"] == {"apiVersion": "v1", "kind": "Node", "name": "n1"}
    api.close()


def test_tls_with_the_configured_ca_and_client_certificate(tls_recorder: Any) -> None:
    recorder, certs = tls_recorder
    port = recorder.server_address[1]
    settings = {"ssl_ca_cert": str(certs / "server-ca.crt")}
    with pytest.raises(KubeUnavailable):  # no client certificate: the server refuses
        _api(port, host=f"https://localhost:{port}", **settings).bind_pod(NS, "a", "n1")
    settings |= {
        "cert_file": str(certs / "scheduler.crt"),
        "key_file": str(certs / "scheduler.key"),
    }
    api = _api(port, host=f"https://localhost:{port}", **settings)
    api.bind_pod(NS, "b", "n1")
    api.bind_pod(NS, "c", "n1")
    assert [path.split("/")[-2] for _, _, path, _ in recorder.seen] == ["b", "c"]
    assert len({port for port, *_ in recorder.seen}) == 1
    with pytest.raises(KubeUnavailable):  # a server the configured CA did not sign
        _api(port, host=f"https://localhost:{port}").bind_pod(NS, "d", "n1")


def test_a_connection_the_server_closed_is_replaced_before_sending(recorder: Any) -> None:
    recorder.hang_up = True
    api = _api(recorder.server_address[1])
    for name in ("a", "b", "c"):
        api.bind_pod(NS, name, "n1")
        assert recorder.closed.acquire(timeout=5)  # the server has hung up, unannounced
    assert [path.split("/")[-2] for _, _, path, _ in recorder.seen] == ["a", "b", "c"]
    assert len({port for port, *_ in recorder.seen}) == 3
    api.close()


@pytest.mark.parametrize(
    ("status", "error"),
    [(409, KubeConflict), (403, KubeForbidden), (422, KubeInvalid), (500, KubeUnavailable)],
)
def test_refusals_are_translated(
    kube: KubeApi, kube_server: FakeApiServer, status: int, error: type[Exception]
) -> None:
    assert kube._poster is not None  # the lean path serves these binds
    kube_server.inject("POST", "/binding", status=status, message="injected")
    with pytest.raises(error, match=r"bind pod default/a to n1: .*injected") as raised:
        kube.bind_pod(NS, "a", "n1")
    assert getattr(raised.value, "status", None) == status


def test_a_dropped_request_is_unavailable_and_the_next_one_works(
    kube: KubeApi, kube_server: FakeApiServer
) -> None:
    kube_server.store.put({"kind": "Pod", "metadata": {"name": "a", "namespace": NS}, "spec": {}})
    kube_server.inject("POST", "/binding", drop=True)
    with pytest.raises(KubeUnavailable):
        kube.bind_pod(NS, "a", "n1")
    kube.bind_pod(NS, "a", "n1")
    assert kube.get_pod(NS, "a")["spec"]["nodeName"] == "n1"


def test_configurations_it_does_not_cover_use_the_client() -> None:
    config = Configuration()
    config.host = "https://127.0.0.1:6443"
    config.proxy = "http://proxy:3128"
    assert LeanPoster.for_client(ApiClient(config)) is None
    config.proxy = None
    config.tls_server_name = "kubernetes"
    assert LeanPoster.for_client(ApiClient(config)) is None
