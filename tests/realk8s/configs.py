"""Files and flags of the real components: kubeconfigs, kube-apiserver flags, the kubelet's
KubeletConfiguration and the vgpu-scheduler configuration from daemonset/scheduler.

The scheduler configuration is the shipped file with only the client kubeconfig, the extender URL
and (when the extender serves TLS) the extender's CA changed, so what is tested is what ships.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tests.realk8s.rest import Identity

Obj = dict[str, Any]
SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc"


def write_kubeconfig(path: Path, server: str, ca: Path, who: Identity) -> Path:
    """A kubeconfig for one identity; read by the components and by `vgpu --kubeconfig`."""
    user: Obj = {}
    if who.token:
        user["token"] = who.token
    else:
        user["client-certificate"], user["client-key"] = who.cert, who.key
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "test", "cluster": {"server": server, "certificate-authority": str(ca)}}
        ],
        "users": [{"name": who.name, "user": user}],
        "contexts": [{"name": "test", "context": {"cluster": "test", "user": who.name}}],
        "current-context": "test",
    }
    path.write_text(yaml.safe_dump(config))
    return path


def apiserver_args(pki: Path, etcd_url: str, port: int) -> list[str]:
    """kube-apiserver with RBAC (and the Node authorizer), the default admission chain (which
    includes ValidatingAdmissionPolicy and NodeRestriction when enabled), loopback only."""
    return [
        f"--etcd-servers={etcd_url}",
        "--bind-address=127.0.0.1",
        "--advertise-address=127.0.0.1",
        f"--secure-port={port}",
        f"--tls-cert-file={pki / 'apiserver.crt'}",
        f"--tls-private-key-file={pki / 'apiserver.key'}",
        f"--client-ca-file={pki / 'ca.crt'}",
        f"--kubelet-certificate-authority={pki / 'ca.crt'}",
        f"--kubelet-client-certificate={pki / 'apiserver-kubelet-client.crt'}",
        f"--kubelet-client-key={pki / 'apiserver-kubelet-client.key'}",
        f"--service-account-key-file={pki / 'sa.key'}",
        f"--service-account-signing-key-file={pki / 'sa.key'}",
        f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}",
        "--service-cluster-ip-range=10.0.0.0/24",
        "--authorization-mode=Node,RBAC",
        "--enable-admission-plugins=NodeRestriction",
        "--allow-privileged=true",
        "--profiling=false",
        "--endpoint-reconciler-type=none",  # no kubernetes Service endpoint for 127.0.0.1
        f"--cert-dir={pki / 'generated'}",
    ]


def kubelet_config(node_dir: Path, pki: Path, name: str, port: int, healthz: int) -> Obj:
    """A KubeletConfiguration for a kubelet that runs no real containers: cgroup management,
    node-allocatable enforcement, swap and cgroup v1 checks off; the fake CRI runtime's socket."""
    socket = f"unix://{node_dir / 'cri.sock'}"
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": "127.0.0.1",
        "port": port,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": healthz,
        "tlsCertFile": str(pki / f"kubelet-{name}.crt"),
        "tlsPrivateKeyFile": str(pki / f"kubelet-{name}.key"),
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": False},
            "x509": {"clientCAFile": str(pki / "ca.crt")},
        },
        "authorization": {"mode": "AlwaysAllow"},
        "containerRuntimeEndpoint": socket,
        "imageServiceEndpoint": socket,
        "cgroupDriver": "cgroupfs",
        "cgroupsPerQOS": False,
        "enforceNodeAllocatable": [],
        "failSwapOn": False,
        "failCgroupV1": False,
        "localStorageCapacityIsolation": False,
        "podLogsDir": str(node_dir / "pod-logs"),
        "resolvConf": "",
        "syncFrequency": "5s",
        "nodeStatusUpdateFrequency": "4s",
        "nodeStatusReportFrequency": "10s",
        "evictionHard": {
            "memory.available": "1Mi",
            "nodefs.available": "1%",
            "imagefs.available": "1%",
        },
        "serializeImagePulls": False,
    }


def scheduler_flags(chart_values: Path) -> list[str]:
    """The flags the chart gives a kube-scheduler of 1.33 or later beyond its configuration
    (charts/vgpu/templates/scheduler/deployment.yaml), from the chart's default values: the
    rendered daemonset/ pins an older scheduler, which has no such gate."""
    values: Obj = yaml.safe_load(chart_values.read_text())
    if values["scheduler"].get("popFromBackoffQ", True):
        return []
    return ["--feature-gates=SchedulerPopFromBackoffQ=false"]


def scheduler_config(shipped: Path, kubeconfig: Path, extender_url: str, pki: Path) -> Obj:
    """The shipped KubeSchedulerConfiguration with only the client kubeconfig, the extender's
    address and the extender TLS files (client certificate, CA) changed."""
    config: Obj = yaml.safe_load(shipped.read_text())
    config["clientConnection"] = {"kubeconfig": str(kubeconfig)}
    for extender in config.get("extenders", []):
        scheme = "https" if extender.get("enableHTTPS") else "http"
        extender["urlPrefix"] = f"{scheme}://{extender_url}"
        if "tlsConfig" in extender:
            extender["tlsConfig"] = {
                "certFile": str(pki / "extender-client.crt"),
                "keyFile": str(pki / "extender-client.key"),
                "caFile": str(pki / "ca.crt"),
            }
    return config
