"""The shipped manifests wire the authenticated transport end to end: kube-scheduler calls the
extender over HTTPS with a client certificate, the extender requires one, and only the
scheduler's pods reach the extender's port."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.deploy.test_manifests import ROOT, by_name, documents, objects

Obj = dict[str, Any]
CONFIGS = sorted((ROOT / "scheduler").glob("*config*.yaml"))


def _container(kind: str, name: str) -> tuple[Obj, Obj]:
    spec = by_name(kind, name)["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    return spec, container


def _mounted(spec: Obj, container: Obj, secret: str) -> str:
    (volume,) = [
        v["name"] for v in spec["volumes"] if v.get("secret", {}).get("secretName") == secret
    ]
    (mount,) = [m["mountPath"] for m in container["volumeMounts"] if m["name"] == volume]
    return str(mount).rstrip("/")


def _flags(container: Obj) -> dict[str, str]:
    return dict(a.split("=", 1) if "=" in a else (a, "") for a in container["args"][1:])


def test_the_extender_serves_https_requiring_client_certificates() -> None:
    spec, container = _container("Deployment", "vgpu-extender")
    flags = _flags(container)
    assert "--insecure-http" not in flags
    tls = _mounted(spec, container, "vgpu-extender-tls")
    assert flags["--tls-cert"] == f"{tls}/tls.crt" and flags["--tls-key"] == f"{tls}/tls.key"
    assert flags["--client-ca"] == f"{tls}/client-ca.crt"
    ports = {p["name"]: p for p in container["ports"]}
    port = ports["https"]
    assert port["containerPort"] == int(flags["--port"])
    assert ports["probes"]["containerPort"] == int(flags["--probe-port"])
    for probe in ("livenessProbe", "readinessProbe"):  # plain HTTP on a port of their own
        assert container[probe]["httpGet"]["port"] == "probes"
        assert container[probe]["httpGet"].get("scheme", "HTTP") == "HTTP"
    service = by_name("Service", "vgpu-extender")
    assert [p["targetPort"] for p in service["spec"]["ports"]] == [port["name"]]


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_scheduler_configs_call_the_extender_with_their_client_certificate(path: Path) -> None:
    spec, container = _container("Deployment", "vgpu-scheduler")
    client = _mounted(spec, container, "vgpu-scheduler-extender-client")
    service = by_name("Service", "vgpu-extender")
    (config,) = documents(path)
    for extender in config["extenders"]:
        assert extender["urlPrefix"].startswith("https://vgpu-extender.vgpu-system.svc:")
        port = int(extender["urlPrefix"].split(":")[2].split("/")[0])
        assert port in [p["port"] for p in service["spec"]["ports"]]
        assert extender["enableHTTPS"] is True
        # ExtenderTLSConfig (k8s.io/kube-scheduler/config/v1): insecure, serverName, certFile,
        # keyFile, caFile and the *Data forms.
        assert extender["tlsConfig"] == {
            "certFile": f"{client}/tls.crt",
            "keyFile": f"{client}/tls.key",
            "caFile": f"{client}/ca.crt",
        }


def test_only_the_schedulers_pods_reach_the_extender_port() -> None:
    (policy,) = [p for p in objects("NetworkPolicy") if p["metadata"]["name"] == "vgpu-extender"]
    pods = by_name("Deployment", "vgpu-extender")["spec"]["template"]["metadata"]["labels"]
    scheduler = by_name("Deployment", "vgpu-scheduler")["spec"]["template"]["metadata"]["labels"]
    spec = policy["spec"]
    assert spec["policyTypes"] == ["Ingress"]
    assert spec["podSelector"]["matchLabels"].items() <= pods.items()
    (rule,) = spec["ingress"]
    (source,) = rule["from"]
    assert set(source) == {"podSelector"}  # same namespace, these pods only
    assert source["podSelector"]["matchLabels"].items() <= scheduler.items()
    assert source["podSelector"]["matchLabels"].get("app.kubernetes.io/component") == "scheduler"
    _, container = _container("Deployment", "vgpu-extender")
    # not the probe port: only the node (the kubelet's probes) needs it
    assert [p["port"] for p in rule["ports"]] == [container["ports"][0]["name"]] == ["https"]


def test_no_private_key_is_committed() -> None:
    repo = ROOT.parent
    for path in repo.rglob("*"):
        if ".git" in path.parts or ".venv" in path.parts or not path.is_file():
            continue
        if path.suffix in {".key", ".pem", ".crt"}:
            raise AssertionError(f"{path} looks like key material")
        if path.stat().st_size < 1_000_000 and path.suffix in {
            ".yaml",
            ".yml",
            ".py",
            ".sh",
            ".md",
        }:
            assert "PRIVATE KEY-----\n" not in path.read_text(errors="ignore"), path
