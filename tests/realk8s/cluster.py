"""A test cluster of the real Kubernetes components on loopback, with vgpu's daemons.

etcd, kube-apiserver, the vgpu-scheduler (real kube-scheduler, shipped configuration), and per
node a real kubelet on Kubernetes' fake CRI runtime with `vgpu node-agent --fake-gpus` as its
device plugin (tests/realk8s/nodes.py); plus the vgpu extender. All Kubernetes parts come from
one Go binary (hack/testcluster, `testcluster <component>`).

vgpu's daemons authenticate with tokens of the service accounts in daemonset/rbac (TokenRequest;
with `chart`, those `helm install` of the chart creates: `chart_install`);
kube-scheduler as the vgpu-scheduler service account; kubelets as system:node:NAME.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import secrets
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import yaml

from tests.realk8s import chart_install, configs, manifests, pods
from tests.realk8s.nodes import NodeControl, NodeSpec
from tests.realk8s.objects import POD_GROUP_CRD, cluster_role_binding
from tests.realk8s.processes import Processes, free_port, wait_until
from tests.realk8s.rest import ApiError, Identity, Obj, Rest

REPO = Path(__file__).resolve().parents[2]
DAEMONSET = REPO / "daemonset"
SYSTEM = "vgpu-system"
PODGROUPS = "namespaces/default/podgroups"
ACCOUNTS = ("vgpu-extender", "vgpu-node-agent", "vgpu-scheduler", "vgpu-inspect-user")


class RealCluster(NodeControl):
    """`up()` starts everything and waits until each node's vGPUs are schedulable."""

    def __init__(
        self,
        root: Path,
        binary: Path,
        nodes: list[NodeSpec],
        *,
        admission_policy: bool = True,
        chart: bool = False,
    ) -> None:
        """`chart`: vgpu's objects from `helm install` of the chart (`chart_install`), not
        POSTed from daemonset/."""
        if chart:
            nodes = [
                dataclasses.replace(n, agent_flags=(*n.agent_flags, *chart_install.agent_flags()))
                for n in nodes
            ]
        self.root, self.binary, self.nodes = root, binary, {n.name: n for n in nodes}
        self.admission_policy = admission_policy
        self.chart = chart
        self.pki = root / "pki"
        self.procs = Processes(root)
        self.ports = {
            k: free_port() for k in ("etcd", "peer", "apiserver", "scheduler", "extender")
        }
        self.server = f"https://127.0.0.1:{self.ports['apiserver']}"
        self.key_file = root / "assignment-key"
        self.tokens: dict[str, str] = {}
        self._admin: Rest | None = None

    # -- identities ------------------------------------------------------------------------------
    @property
    def admin(self) -> Rest:
        if self._admin is None:
            who = Identity("admin", str(self.pki / "admin.crt"), str(self.pki / "admin.key"))
            self._admin = Rest(self.server, str(self.pki / "ca.crt"), who)
        return self._admin

    def as_account(self, account: str) -> Rest:
        return Rest(
            self.server, str(self.pki / "ca.crt"), Identity(account, token=self.tokens[account])
        )

    def kubeconfig(self, who: str) -> Path:
        return self.root / "kubeconfigs" / f"{who}.yaml"

    # -- lifecycle -------------------------------------------------------------------------------
    def up(self, *, api_only: bool = False) -> RealCluster:
        """Start the cluster; with `api_only`, etcd and the API server (set up) alone."""
        started = time.monotonic()
        self._run(
            [str(self.binary), "certs", f"--dir={self.pki}", f"--nodes={','.join(self.nodes)}"]
        )
        self.key_file.write_text(secrets.token_hex(32))
        self.start_etcd()
        self.start_apiserver()
        self._bootstrap()
        if api_only:
            return self
        self.start_scheduler()
        pods.show_agent_logs(lambda node: self.procs.log(f"agent-{node}"))
        for name in self.nodes:
            self.start_node(name)
        self.start_extender("extender-0", None, *self.extender_flags())
        for name in self.nodes:
            self.wait_node_gpus(name)
        (self.root / "cluster.json").write_text(json.dumps(self.describe(), indent=2))
        print(f"test cluster up in {time.monotonic() - started:.1f}s", file=sys.stderr)
        return self

    def down(self) -> None:
        self.procs.stop_all()
        if self._admin is not None:
            self._admin.close()

    def describe(self) -> Obj:
        return {
            "server": self.server,
            "ca": str(self.pki / "ca.crt"),
            "kubeconfigs": {
                p.stem: str(p) for p in sorted((self.root / "kubeconfigs").glob("*.yaml"))
            },
            "extender": f"https://127.0.0.1:{self.ports['extender']}",
            "nodes": list(self.nodes),
            "logs": str(self.procs.logs),
            "chart": f"helm release {chart_install.RELEASE} in {SYSTEM}" if self.chart else None,
        }

    def _watching(self, component: str) -> tuple[Path, Callable[[], bool]]:
        """A component's log and liveness, for `wait_until`."""
        return self.procs.log(component), functools.partial(self.procs.alive, component)

    def _run(self, argv: list[str]) -> None:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"{argv[1]} failed: {done.stderr.strip()}")

    # -- control plane ---------------------------------------------------------------------------
    def start_etcd(self) -> None:
        url = f"http://127.0.0.1:{self.ports['etcd']}"
        self.procs.start(
            "etcd",
            [
                str(self.binary),
                "etcd",
                f"--data-dir={self.root / 'etcd'}",
                f"--listen-client-url={url}",
                f"--listen-peer-url=http://127.0.0.1:{self.ports['peer']}",
            ],
        )
        wait_until(
            lambda: "etcd ready" in self.procs.log("etcd").read_text(),
            60,
            "etcd",
            self._watching("etcd"),
        )

    def start_apiserver(self) -> None:
        etcd = f"http://127.0.0.1:{self.ports['etcd']}"
        args = configs.apiserver_args(self.pki, etcd, self.ports["apiserver"])
        self.procs.start("kube-apiserver", [str(self.binary), "kube-apiserver", *args])
        wait_until(
            lambda: self.admin.request("GET", "/readyz") is not None,
            180,
            "kube-apiserver /readyz",
            self._watching("kube-apiserver"),
        )

    def _bootstrap(self) -> None:
        """vgpu's namespace, RBAC and admission policy as shipped; tokens for its accounts."""
        shipped = [
            "namespace.yaml",
            "rbac/extender.yaml",
            "rbac/node-agent.yaml",
            "rbac/scheduler.yaml",
            "rbac/inspect.yaml",
        ]
        if self.admission_policy:  # benchmarks fill nodes with bound pods as admin: no policy
            shipped.append("admission-policy.yaml")
        (self.root / "kubeconfigs").mkdir(exist_ok=True)
        self._admin_kubeconfig()
        if self.chart:
            chart_install.install(self.kubeconfig("admin"))
            for obj in chart_install.queue_namespaces():
                manifests.create(self.admin, obj)
        else:
            for name in shipped:
                manifests.apply_file(self.admin, DAEMONSET / name)
        # A user of `kubectl inspect vgpu`: the shipped role, granted as its comment says.
        manifests.create(
            self.admin,
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": "vgpu-inspect-user", "namespace": SYSTEM},
            },
        )
        manifests.create(
            self.admin, cluster_role_binding("vgpu-inspect-user", "vgpu-inspect", SYSTEM)
        )
        # scheduler-plugins' PodGroup, as a gang's PodGroup is read by the extender.
        manifests.create(self.admin, POD_GROUP_CRD)
        wait_until(
            lambda: self.admin.get(f"/apis/scheduling.x-k8s.io/v1alpha1/{PODGROUPS}"),
            60,
            "the PodGroup CRD to be served",
        )
        # No kube-controller-manager runs: the default service account it would create.
        manifests.create(
            self.admin,
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": "default", "namespace": "default"},
                "automountServiceAccountToken": False,
            },
        )
        for account in ACCOUNTS:
            self.tokens[account] = manifests.service_account_token(self.admin, SYSTEM, account)
            configs.write_kubeconfig(
                self.kubeconfig(account),
                self.server,
                self.pki / "ca.crt",
                Identity(account, token=self.tokens[account]),
            )

    def _admin_kubeconfig(self) -> None:  # helm, and a person at the cluster, read it
        configs.write_kubeconfig(
            self.kubeconfig("admin"),
            self.server,
            self.pki / "ca.crt",
            Identity("admin", str(self.pki / "admin.crt"), str(self.pki / "admin.key")),
        )

    def start_scheduler(
        self,
        shipped: str = "kube-scheduler-config.yaml",
        edit: Callable[[Obj], None] | None = None,
        extender_port: int | None = None,
    ) -> None:
        """The vgpu-scheduler with a shipped configuration, calling the extender at
        `extender_port` (default: the first extender's); `edit` changes it (benchmarks only)."""
        config = configs.scheduler_config(
            DAEMONSET / "scheduler" / shipped,
            self.kubeconfig("vgpu-scheduler"),
            f"127.0.0.1:{extender_port or self.ports['extender']}/scheduler",
            self.pki,
        )
        if edit is not None:
            edit(config)
        before = self._lease_holder(SYSTEM, "vgpu-scheduler")
        path = self.root / "scheduler-config.yaml"
        path.write_text(yaml.safe_dump(config))
        kc = self.kubeconfig("vgpu-scheduler")
        self.procs.start(
            "kube-scheduler",
            [
                str(self.binary),
                "kube-scheduler",
                f"--config={path}",
                f"--secure-port={self.ports['scheduler']}",
                "--bind-address=127.0.0.1",
                f"--authentication-kubeconfig={kc}",
                f"--authorization-kubeconfig={kc}",
                # bench/real_metrics.py reads /metrics without credentials (loopback only)
                "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
                "--v=2",  # one line per scheduling attempt and binding
                *configs.scheduler_flags(REPO / "charts" / "vgpu" / "values.yaml"),
            ],
        )
        wait_until(
            lambda: self._lease_holder(SYSTEM, "vgpu-scheduler") not in (None, before),
            90,
            "kube-scheduler to lead",
            self._watching("kube-scheduler"),
        )

    def extender_flags(self) -> tuple[str, ...]:
        """The flags extender-0 starts with (the chart's, where the chart set the cluster up)."""
        return tuple(chart_install.extender_flags()) if self.chart else ()

    def extender_leader(self) -> str | None:
        """The identity of the extender replica holding the lease."""
        return self._lease_holder(SYSTEM, "vgpu-extender")

    def _lease_holder(self, namespace: str, name: str) -> str | None:
        try:
            lease = self.admin.get(
                f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}"
            )
        except ApiError:
            return None
        holder = lease.get("spec", {}).get("holderIdentity")
        return str(holder) if holder else None

    def start_extender(
        self,
        identity: str,
        port: int | None = None,
        *flags: str,
        profile: Path | None = None,
        kubeconfig: Path | None = None,
    ) -> None:
        """An extender replica with extra `flags`; with `profile`, under cProfile writing there
        at its exit (benchmarks only); with `kubeconfig`, reaching the API server through it."""
        port = port or self.ports["extender"]
        kubeconfig = kubeconfig or self.kubeconfig("vgpu-extender")
        profiled = ["-m", "cProfile", "-o", str(profile)] if profile else []
        self.procs.start(
            identity,
            [
                sys.executable,
                *profiled,
                "-m",
                "vgpu",
                "extender",
                "--host=127.0.0.1",
                f"--port={port}",
                f"--kubeconfig={kubeconfig}",
                f"--tls-cert={self.pki / 'extender.crt'}",
                f"--tls-key={self.pki / 'extender.key'}",
                f"--client-ca={self.pki / 'ca.crt'}",
                f"--assignment-key-file={self.key_file}",
                f"--lease-namespace={SYSTEM}",
                "--lease-name=vgpu-extender",
                f"--identity={identity}",
                f"--probe-port={free_port()}",  # replicas share the host: not the default 8081
                *flags,
            ],
        )
        wait_until(
            lambda: self._lease_holder(SYSTEM, "vgpu-extender"),
            60,
            "an extender to lead",
            self._watching(identity),
        )


__all__ = ["NodeSpec", "RealCluster"]
