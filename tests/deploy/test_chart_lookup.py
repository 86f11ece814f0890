"""The assignment key is created only when absent and never overwritten, checked through Helm's
real `lookup` against an API server: `helm template --dry-run=server` reads the Secret over HTTP
from a minimal stand-in that serves discovery and one Secret (all `lookup` needs).

Needs helm like test_chart.py: skipped without it, failed without it under CI=true.
"""

from __future__ import annotations

import base64
import json
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.test_chart import _helm_or_skip

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "hack"))
import chart  # noqa: E402

Obj = dict[str, Any]
NS, NAME = "vgpu-system", "vgpu-assignment-key"
DISCOVERY: dict[str, Obj] = {
    "/version": {"major": "1", "minor": "31", "gitVersion": "v1.31.4"},
    "/api": {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []},
    "/apis": {"kind": "APIGroupList", "apiVersion": "v1", "groups": []},
    "/api/v1": {
        "kind": "APIResourceList",
        "groupVersion": "v1",
        "resources": [
            {"name": "secrets", "namespaced": True, "kind": "Secret", "verbs": ["get"]},
        ],
    },
}


class Cluster:
    """Secrets by (namespace, name), served at /api/v1/namespaces/NS/secrets/NAME."""

    def __init__(self) -> None:
        self.secrets: dict[tuple[str, str], Obj] = {}
        self.reads: list[str] = []
        cluster = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                parts = path.strip("/").split("/")
                found: Obj | None = DISCOVERY.get(path)
                if len(parts) == 6 and parts[:3] == ["api", "v1", "namespaces"]:
                    cluster.reads.append(path)
                    found = cluster.secrets.get((parts[3], parts[5]))
                body = json.dumps(found or {"kind": "Status", "code": 404, "reason": "NotFound"})
                self.send_response(200 if found else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body.encode())

            def log_message(self, format: str, *args: object) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def kubeconfig(self, tmp: Path) -> Path:
        path = tmp / "kubeconfig"
        url = f"http://127.0.0.1:{self.server.server_address[1]}"
        path.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "c", "cluster": {"server": url}}],
                    "users": [{"name": "u", "user": {"token": "t"}}],
                    "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                    "current-context": "c",
                }
            )
        )
        return path


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    _helm_or_skip()
    c = Cluster()
    yield c
    c.server.shutdown()
    c.server.server_close()


def secrets(cluster: Cluster, tmp: Path, *sets: str) -> dict[str, Obj]:
    """The Secrets an install or upgrade of release `vgpu` would apply, by name."""
    out = chart.run_helm(
        "template", "vgpu", str(chart.CHART), "-n", NS, "--kube-version", "v1.31.4",
        "--dry-run=server", "--kubeconfig", str(cluster.kubeconfig(tmp)),
        *(arg for s in sets for arg in ("--set", s)),
    )  # fmt: skip
    assert f"/api/v1/namespaces/{NS}/secrets/{NAME}" in cluster.reads, "no lookup reached us"
    docs = [d for d in yaml.safe_load_all(out) if d and d["kind"] == "Secret"]
    return {d["metadata"]["name"]: d for d in docs}


def keys(cluster: Cluster, tmp: Path) -> list[Obj]:
    """The assignment-key Secrets an install or upgrade would apply."""
    found = secrets(cluster, tmp).get(NAME)
    return [] if found is None else [found]


def secret(annotations: dict[str, str], key: bytes) -> Obj:
    meta = {"name": NAME, "namespace": NS, "annotations": annotations}
    return {"apiVersion": "v1", "kind": "Secret", "metadata": meta, "data": {"key": b64(key)}}


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_absent_key_is_created_random_and_kept_on_uninstall(
    cluster: Cluster, tmp_path: Path
) -> None:
    (created,) = keys(cluster, tmp_path)
    key = base64.b64decode(created["data"]["key"])
    assert len(key) == 64 and int(key, 16) >= 0
    assert created["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"


def test_the_releases_own_key_is_rendered_unchanged_on_upgrade(
    cluster: Cluster, tmp_path: Path
) -> None:
    cluster.secrets[NS, NAME] = secret({"meta.helm.sh/release-name": "vgpu"}, b"rotated-key")
    (kept,) = keys(cluster, tmp_path)
    assert kept["data"]["key"] == b64(b"rotated-key")


def test_a_key_made_by_hand_is_left_alone(cluster: Cluster, tmp_path: Path) -> None:
    cluster.secrets[NS, NAME] = secret({}, b"made-with-kubectl")
    assert keys(cluster, tmp_path) == []


TLS = ("vgpu-extender-tls", "vgpu-scheduler-extender-client")


@pytest.mark.parametrize("owner", ["vgpu", "by hand"])
def test_tls_secrets_are_issued_once_then_kept_or_left_alone(
    cluster: Cluster, tmp_path: Path, owner: str
) -> None:
    fresh = secrets(cluster, tmp_path, "extender.tls.enabled=true")
    assert set(TLS) <= set(fresh)
    annotations = {"meta.helm.sh/release-name": owner} if owner == "vgpu" else {}
    for name in TLS:
        existing = fresh[name]
        existing["metadata"]["annotations"] = annotations
        cluster.secrets[NS, name] = existing
    again = secrets(cluster, tmp_path, "extender.tls.enabled=true")
    if owner == "vgpu":
        assert {n: again[n]["data"] for n in TLS} == {n: fresh[n]["data"] for n in TLS}
    else:
        assert set(TLS) & set(again) == set()
