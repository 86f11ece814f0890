"""Structural invariants of daemonset/: least-privilege RBAC, wiring, kustomization, samples."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2] / "daemonset"
NAMESPACE = "vgpu-system"
WORKLOADS = {"DaemonSet", "Deployment", "StatefulSet", "Job"}

Obj = dict[str, Any]


def documents(path: Path) -> list[Obj]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def installed() -> Iterator[tuple[Path, Obj]]:
    """Every object the main kustomization installs (files that exist)."""
    kustomization = documents(ROOT / "kustomization.yaml")[0]
    for ref in kustomization["resources"]:
        if (ROOT / ref).exists():
            yield from ((ROOT / ref, d) for d in documents(ROOT / ref))


def objects(kind: str) -> list[Obj]:
    return [d for _, d in installed() if d["kind"] == kind]


def by_name(kind: str, name: str) -> Obj:
    (found,) = [d for d in objects(kind) if d["metadata"]["name"] == name]
    return found


def rules(kind: str, name: str) -> set[tuple[str, str, str]]:
    return {
        (group, resource, verb)
        for rule in by_name(kind, name)["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def expand(spec: dict[tuple[str, str], str]) -> set[tuple[str, str, str]]:
    return {(g, r, v) for (g, r), verbs in spec.items() for v in verbs.split()}


EXPECTED_RULES = {
    ("ClusterRole", "vgpu-node-agent"): {
        ("", "nodes"): "get patch",
        ("", "pods"): "list watch patch",
        ("", "events"): "create",
    },
    ("ClusterRole", "vgpu-extender"): {
        ("", "nodes"): "list watch",
        ("", "namespaces"): "list",  # queues bound to namespaces by label
        ("", "pods"): "get list watch patch",  # patch: the queue gate
        ("", "pods/eviction"): "create",  # queue reclaim, so PodDisruptionBudgets hold
        ("", "pods/binding"): "create",
        ("scheduling.x-k8s.io", "podgroups"): "get",
        ("", "events"): "create",
    },
    ("Role", "vgpu-extender-leader-election"): {
        ("coordination.k8s.io", "leases"): "get create update",
        ("", "configmaps"): "get",  # the queue ConfigMap
    },
    ("Role", "vgpu-scheduler-leader-election"): {
        ("coordination.k8s.io", "leases"): "get create update"
    },
    ("ClusterRole", "vgpu-inspect"): {
        ("", "nodes"): "list",
        ("", "pods"): "list",
        ("", "events"): "list",
        ("coordination.k8s.io", "leases"): "get",
        ("scheduling.x-k8s.io", "podgroups"): "get",
        ("", "configmaps"): "get",  # --queues: the queue ConfigMap, by name only
    },
}


@pytest.mark.parametrize("role", sorted(EXPECTED_RULES), ids=lambda r: r[1])
def test_rbac_grants_exactly_what_each_component_uses(role: tuple[str, str]) -> None:
    assert rules(*role) == expand(EXPECTED_RULES[role])


def test_no_role_is_left_unchecked_or_uses_wildcards() -> None:
    roles = {(d["kind"], d["metadata"]["name"]) for d in objects("ClusterRole") + objects("Role")}
    assert roles == set(EXPECTED_RULES)
    for _, doc in installed():
        for rule in doc.get("rules", []):
            assert "*" not in rule["verbs"] + rule["resources"] + rule["apiGroups"], doc


def workload_accounts() -> dict[str, str]:
    return {
        d["metadata"]["name"]: d["spec"]["template"]["spec"].get("serviceAccountName", "default")
        for d in (x for _, x in installed() if x["kind"] in WORKLOADS)
    }


def test_every_service_account_is_used_bound_and_every_workload_has_its_own() -> None:
    accounts = {d["metadata"]["name"] for d in objects("ServiceAccount")}
    used = workload_accounts()
    assert set(used.values()) <= accounts
    assert len(set(used.values())) == len(used), f"workloads share an account: {used}"
    unused = accounts - set(used.values())
    if not (ROOT / "scheduler" / "deployment.yaml").exists():
        unused -= {"vgpu-scheduler"}  # its Deployment comes with daemonset/scheduler/
    assert unused == set()
    bound = {
        s["name"]
        for d in objects("ClusterRoleBinding") + objects("RoleBinding")
        for s in d["subjects"]
        if s["kind"] == "ServiceAccount" and s["namespace"] == NAMESPACE
    }
    assert accounts <= bound


def test_scheduler_deployment_uses_its_account_and_config() -> None:
    path = ROOT / "scheduler" / "deployment.yaml"
    if not path.exists():
        pytest.skip("daemonset/scheduler/ is written on the extender branch; not merged yet")
    (deployment,) = [d for d in documents(path) if d["kind"] == "Deployment"]
    spec = deployment["spec"]["template"]["spec"]
    assert spec["serviceAccountName"] == "vgpu-scheduler"
    config_maps = {v.get("configMap", {}).get("name") for v in spec.get("volumes", [])}
    assert "vgpu-scheduler-config" in config_maps


def test_kustomization_lists_every_manifest() -> None:
    kustomization = documents(ROOT / "kustomization.yaml")[0]
    named = {ROOT / r for r in kustomization["resources"]}
    named |= {
        ROOT / f.split("=", 1)[-1] for g in kustomization["configMapGenerator"] for f in g["files"]
    }
    samples = ROOT / "samples"
    named |= {samples / r for r in documents(samples / "kustomization.yaml")[0]["resources"]}
    on_disk = {p for p in ROOT.rglob("*.yaml") if p.name != "kustomization.yaml"}
    assert on_disk - named == set()
    missing = {p for p in named - on_disk if "scheduler" not in p.relative_to(ROOT).parts}
    assert missing == set()


def test_namespaced_objects_name_the_vgpu_namespace() -> None:
    for path, doc in installed():
        if doc["kind"] in {"Namespace", "ClusterRole", "ClusterRoleBinding"} or doc[
            "kind"
        ].startswith("ValidatingAdmissionPolicy"):
            continue
        expected = "kube-system" if "extension-apiserver" in doc["metadata"]["name"] else NAMESPACE
        assert doc["metadata"].get("namespace") == expected, (path.name, doc["metadata"]["name"])


@pytest.mark.parametrize("name", ["vgpu-node-agent", "vgpu-extender"])
def test_components_have_probes_limits_and_the_key(name: str) -> None:
    kind = "DaemonSet" if name == "vgpu-node-agent" else "Deployment"
    spec = by_name(kind, name)["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    assert container["livenessProbe"]["httpGet"] and container["readinessProbe"]["httpGet"]
    assert {"cpu", "memory"} <= set(container["resources"]["limits"])
    security = container["securityContext"]
    if name == "vgpu-node-agent":  # it mounts a tmpfs per container directory (isolation.md)
        assert security["privileged"] is True and "--container-dir-tmpfs" in container["args"]
    else:
        assert security["allowPrivilegeEscalation"] is False
    secrets = {v["secret"]["secretName"] for v in spec["volumes"] if "secret" in v}
    secrets -= {"vgpu-extender-tls"}  # made per cluster (tests/deploy/test_transport.py)
    assert secrets == {"vgpu-assignment-key"}


def test_applying_the_manifests_never_touches_the_key_secret() -> None:
    """`kubectl apply -k daemonset/` once overwrote the real key with a placeholder."""
    assert objects("Secret") == []


def test_node_agent_reaches_kubelet_sockets_and_only_vgpu_nodes() -> None:
    spec = by_name("DaemonSet", "vgpu-node-agent")["spec"]["template"]["spec"]
    paths = {v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v}
    assert paths == {
        "/var/lib/kubelet/device-plugins",
        "/var/lib/kubelet/pod-resources",
        "/var/lib/vgpu",  # mode auto: vgpu-core installed there, per-container limits
        "/etc/cdi",  # read-only, the runtime check at start: CDI specs
        "/var/run/cdi",
        "/etc/nvidia-container-runtime",  # read-only: the NVIDIA runtime's config.toml
        "/sys/fs/cgroup",  # read-only: the pods' cgroups, for the driver's memory limits
    }
    mounts = {m["name"]: m for m in spec["containers"][0]["volumeMounts"]}
    checks = {"cdi-specs-0", "cdi-specs-1", "nvidia-runtime-config", "host-cgroup"}
    assert all(mounts[name].get("readOnly") for name in checks)
    assert spec["nodeSelector"] == {"vgpu.io/enabled": "true"}
    assert any(t["key"] == "nvidia.com/gpu" for t in spec["tolerations"])


def test_extender_is_highly_available() -> None:
    deployment = by_name("Deployment", "vgpu-extender")
    assert deployment["spec"]["replicas"] == 2
    anti = deployment["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]
    assert anti["preferredDuringSchedulingIgnoredDuringExecution"]
    assert by_name("PodDisruptionBudget", "vgpu-extender")["spec"]["minAvailable"] == 1


def test_admission_policy_allows_exactly_the_vgpu_accounts() -> None:
    policy = by_name("ValidatingAdmissionPolicy", "vgpu-protect-handoff-annotations")
    variables = {v["name"]: v["expression"] for v in policy["spec"]["variables"]}
    assert f"system:serviceaccount:{NAMESPACE}:vgpu-extender" in variables["isExtender"]
    assert f"system:serviceaccount:{NAMESPACE}:vgpu-node-agent" in variables["isAgent"]
    rules_ = policy["spec"]["matchConstraints"]["resourceRules"]
    assert {"pods", "pods/binding"} <= {r for rule in rules_ for r in rule["resources"]}
    binding = by_name("ValidatingAdmissionPolicyBinding", "vgpu-protect-handoff-annotations")
    assert binding["spec"]["policyName"] == policy["metadata"]["name"]
    assert binding["spec"]["validationActions"] == ["Deny"]


def test_the_node_agent_installs_vgpu_core_into_its_state_dir_at_the_hosts_path() -> None:
    """Mode auto: the library the image carries goes to the state dir, which the agent sees at
    the host's own path, so the paths it writes are the ones the runtime mounts."""
    spec = by_name("DaemonSet", "vgpu-node-agent")["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    assert "--mode=auto" in container["args"] and "--state-dir=/var/lib/vgpu" in container["args"]
    (volume,) = [v for v in spec["volumes"] if v.get("hostPath", {}).get("path") == "/var/lib/vgpu"]
    (mount,) = [m for m in container["volumeMounts"] if m["name"] == volume["name"]]
    assert mount["mountPath"] == "/var/lib/vgpu" and not mount.get("readOnly")


def test_the_enforcement_policy_is_installed_and_denies() -> None:
    policy = by_name("ValidatingAdmissionPolicy", "vgpu-protect-enforcement")
    assert policy["spec"]["failurePolicy"] == "Fail"
    binding = by_name("ValidatingAdmissionPolicyBinding", "vgpu-protect-enforcement")
    assert binding["spec"]["policyName"] == "vgpu-protect-enforcement"
    assert binding["spec"]["validationActions"] == ["Deny"]


def sample_pods(name: str) -> list[Obj]:
    return documents(ROOT / "samples" / name)


def limits(pod: Obj) -> dict[str, Any]:
    (container,) = pod["spec"]["containers"]
    return dict(container["resources"]["limits"])


def test_samples_ask_what_they_say() -> None:
    (small,) = sample_pods("pod-30-cores-4gib.yaml")
    assert (limits(small)["vgpu.io/cores"], limits(small)["vgpu.io/memory"]) == (30, 16)
    (two,) = sample_pods("pod-two-gpus.yaml")
    assert limits(two)["vgpu.io/cores"] == 200 and "vgpu.io/memory" not in limits(two)
    gang = sample_pods("gang-tfjob.yaml")
    assert len(gang) == 5
    assert [limits(p).get("vgpu.io/cores", 0) for p in gang] == [0, 100, 100, 100, 100]
    labels = {tuple(sorted(p["metadata"]["labels"].items())) for p in gang}
    assert {(k, v) for group in labels for k, v in group if k.startswith("pod-group")} == {
        ("pod-group.scheduling.sigs.k8s.io/name", "tfjob-mnist"),
        ("pod-group.scheduling.sigs.k8s.io/min-available", "5"),
    }
    for pod in [small, two, *gang]:
        assert pod["spec"]["schedulerName"] == "vgpu-scheduler"


def test_the_node_agents_flags_parse_and_name_gpus_by_cdi() -> None:
    """daemonset/ is generated from the chart; its agent flags go through `vgpu`'s own parser and
    checks (nothing runs): the GPUs by CDI, the directory bounds, the runtime check's paths."""
    from vgpu.cli.main import _load, _parser
    from vgpu.daemons.flags import mode as mode_flags
    from vgpu.node.device_list import DeviceList

    (container,) = by_name("DaemonSet", "vgpu-node-agent")["spec"]["template"]["spec"]["containers"]
    parser, sub = _parser()
    _load(container["args"][0], sub)
    args = parser.parse_args(container["args"])
    assert mode_flags.device_list(args) == DeviceList()
    assert mode_flags.container_dirs(args).root.parent == args.state_dir
    assert args.nvidia_runtime_config.parent.as_posix() == "/etc/nvidia-container-runtime"
