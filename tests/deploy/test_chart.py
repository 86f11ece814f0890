"""The Helm chart: it renders for every CI value set, daemonset/ is its render, and what an
operator relies on (key Secret kept, namespace everywhere, scheduler image = cluster version)
holds in the rendered objects.

Needs helm (hack/build-tools.sh builds .bin/helm from its Go module). Without it these tests
skip, except under CI=true, where a missing helm is a failure: CI must have checked the chart.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "hack"))
import chart  # noqa: E402

Obj = dict[str, Any]


def _helm_or_skip(*tools: str) -> None:
    """Skip without helm (or the other .bin tools named), except under CI=true: fail there."""
    try:
        chart.helm()
        for name in tools:
            chart.tool(name)
    except chart.ChartError as err:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but {err}")
        pytest.skip(str(err))


@pytest.fixture(autouse=True)
def _needs_helm() -> None:
    _helm_or_skip()


def render(values: str = "", kube_version: str = "v1.31.4", **sets: str) -> list[Obj]:
    args = ["template", "vgpu", str(chart.CHART), "-n", "gpu", "--kube-version", kube_version]
    if values:
        args += ["-f", str(chart.CHART / "ci" / f"{values}-values.yaml")]
    for key, value in sets.items():
        args += ["--set", f"{key.replace('__', '.')}={value}"]
    return [d for d in yaml.safe_load_all(chart.run_helm(*args)) if d]


def find(objs: list[Obj], kind: str, name: str) -> Obj:
    (found,) = [o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name]
    return found


def test_daemonset_dir_is_the_chart_render() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "hack" / "chart.py"), "check"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.skipif(
    importlib.util.find_spec("kubernetes_validate") is None,
    reason="kubernetes-validate is not installed",
)
def test_every_value_set_lints_renders_and_validates(tmp_path: Path) -> None:
    _helm_or_skip("promql", "strictkinds")
    assert chart.ci(tmp_path) == 0
    rendered = sorted(tmp_path.rglob("*.yaml"))
    sets = sorted((chart.CHART / "ci").glob("*-values.yaml"))
    assert len({p.parent.name for p in rendered}) == sum(len(chart.ci_versions(v)) for v in sets)


def test_a_render_that_does_not_validate_fails_ci(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text(
        "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec:\n  portz: []\n"
    )
    with pytest.raises(chart.ChartError, match="portz"):
        chart.validate(tmp_path, "v1.37.0")


def test_the_key_secret_is_random_kept_and_absent_with_an_existing_secret() -> None:
    first = find(render(), "Secret", "vgpu-assignment-key")
    second = find(render(), "Secret", "vgpu-assignment-key")
    assert first["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    assert len(first["data"]["key"]) >= 64 and first["data"]["key"] != second["data"]["key"]
    objs = render("minimal")
    assert not [o for o in objs if o["kind"] == "Secret"]
    (agent,) = [o for o in objs if o["kind"] == "DaemonSet"]
    volumes = agent["spec"]["template"]["spec"]["volumes"]
    assert {"secretName": "my-vgpu-key", "defaultMode": 0o400} in [v.get("secret") for v in volumes]


def test_every_namespaced_object_and_the_policy_use_the_chosen_namespace() -> None:
    objs = render("everything")
    for obj in objs:
        ns = obj["metadata"].get("namespace")
        if ns is not None and "extension-apiserver" not in obj["metadata"]["name"]:
            assert ns == "gpu-sharing", obj["metadata"]["name"]
    policy = find(objs, "ValidatingAdmissionPolicy", "vgpu-protect-handoff-annotations")
    text = yaml.safe_dump(policy)
    assert "system:serviceaccount:gpu-sharing:vgpu-extender" in text
    assert "vgpu-system" not in text


def test_scheduler_image_follows_the_cluster_unless_pinned() -> None:
    def image(objs: list[Obj]) -> str:
        spec = find(objs, "Deployment", "vgpu-scheduler")["spec"]["template"]["spec"]
        return str(spec["containers"][0]["image"])

    assert image(render(kube_version="v1.33.1")) == "registry.k8s.io/kube-scheduler:v1.33.1"
    for vendor in ("v1.32.5-eks-1a2b3c", "v1.32.5-gke.1200", "v1.32.5+k3s1"):
        assert image(render(kube_version=vendor)).endswith(":v1.32.5"), vendor
    assert image(render(scheduler__image__tag="v1.30.9")).endswith(":v1.30.9")


def test_memory_unit_and_resource_domain_are_one_value_for_both_daemons() -> None:
    objs = render(
        memoryUnitMiB="512", resourceDomain="gpu.example.com", scheduler__profile="gpu-only"
    )
    agent = find(objs, "DaemonSet", "vgpu-node-agent")["spec"]["template"]["spec"]
    extender = find(objs, "Deployment", "vgpu-extender")["spec"]["template"]["spec"]
    for spec in (agent, extender):
        args = spec["containers"][0]["args"]
        assert {"--memory-unit-mib=512", "--resource-domain=gpu.example.com"} <= set(args)
    config = find(objs, "ConfigMap", "vgpu-scheduler-config")["data"]
    (ext,) = yaml.safe_load(config["scheduler-config-gpu-only.yaml"])["extenders"]
    assert [r["name"] for r in ext["managedResources"]] == [
        "gpu.example.com/cores",
        "gpu.example.com/memory",
    ]


def test_pods_may_choose_only_the_policies_allowed() -> None:
    objs = render(**{"extender__allowPodPolicies": "{binpack,default:online=false}"})
    spec = find(objs, "Deployment", "vgpu-extender")["spec"]["template"]["spec"]
    args = spec["containers"][0]["args"]
    assert [a for a in args if a.startswith("--allow-pod-policy")] == [
        "--allow-pod-policy=binpack",
        "--allow-pod-policy=default:online=false",
    ]
    assert "--policy=default" in args
    tuned = render(**{"extender__policy": "default:online=false"})
    spec = find(tuned, "Deployment", "vgpu-extender")["spec"]["template"]["spec"]
    assert "--policy=default:online=false" in spec["containers"][0]["args"]


def test_tls_wires_the_scheduler_config_to_the_extenders_certificates() -> None:
    objs = render("everything")
    config = yaml.safe_load(
        find(objs, "ConfigMap", "vgpu-scheduler-config")["data"]["scheduler-config-gpu-only.yaml"]
    )
    (extender,) = config["extenders"]
    assert extender["enableHTTPS"] is True
    assert extender["urlPrefix"] == "https://vgpu-extender.gpu-sharing.svc:443/scheduler"
    assert extender["tlsConfig"]["caFile"] == "/etc/vgpu-extender-client/ca.crt"
    assert config["percentageOfNodesToScore"] == 50
    server = find(objs, "Secret", "vgpu-extender-tls")
    client = find(objs, "Secret", "vgpu-scheduler-extender-client")
    # two CAs, as hack/make-extender-certs.sh makes them: neither side can stand in for the other
    assert server["data"]["client-ca.crt"] != client["data"]["ca.crt"]
    spec = find(objs, "Deployment", "vgpu-extender")["spec"]["template"]["spec"]
    args = spec["containers"][0]["args"]
    assert {"--port=8443", "--client-ca=/etc/vgpu/tls/client-ca.crt"} <= set(args)
    assert {"secretName": "vgpu-extender-tls", "defaultMode": 0o440} in [
        v.get("secret") for v in spec["volumes"]
    ]


@pytest.mark.parametrize("best", ["8", "0"])
def test_prioritize_is_called_only_when_the_filter_passes_every_node(best: str) -> None:
    """extender.filterBest is one value for both: the extender narrows its filter to the best
    nodes and the scheduler configurations then leave prioritize out; 0 keeps both halves."""
    objs = render(**{"extender__filterBest": best})
    spec = find(objs, "Deployment", "vgpu-extender")["spec"]["template"]["spec"]
    assert f"--filter-best={best}" in spec["containers"][0]["args"]
    config = find(objs, "ConfigMap", "vgpu-scheduler-config")["data"]
    for name in ("kube-scheduler-config.yaml", "scheduler-config-gpu-only.yaml"):
        (extender,) = yaml.safe_load(config[name])["extenders"]
        if best == "0":
            assert (extender["prioritizeVerb"], extender["weight"]) == ("prioritize", 5)
        else:
            assert "prioritizeVerb" not in extender and "weight" not in extender
        assert extender["filterVerb"] == "filter" and extender["bindVerb"] == "bind"


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("nodeAgent.mode", "strict", "/nodeAgent/mode': value must be one of 'auto', 'vgpu-core'"),
        ("extender.policy", "fastest", "/extender/policy': 'fastest' does not match pattern"),
        ("scheduler.profile", "some", "/scheduler/profile'"),
        ("extender.replicas", "zero", "/extender/replicas': got string, want integer"),
        ("nodeAgnet.mode", "hami", "additional properties 'nodeAgnet' not allowed"),
        ("nodeAgent.hami.coreLibrary", "libvgpu.so", "/nodeAgent/hami/coreLibrary'"),
    ],
)
def test_bad_values_fail_with_the_field_named(key: str, value: str, message: str) -> None:
    """values.schema.json: a typo or a wrong type names the value, before anything renders."""
    with pytest.raises(chart.ChartError, match=re.escape(message)):
        render(**{key.replace(".", "__"): value})


def test_template_checks_still_name_the_field_without_the_schema() -> None:
    """`--skip-schema-validation` still meets the templates' own checks."""
    with pytest.raises(chart.ChartError, match=re.escape('nodeAgent.mode: "strict"')):
        chart.run_helm(
            "template", "v", str(chart.CHART), "--kube-version", "v1.31.4",
            "--skip-schema-validation", "--set", "nodeAgent.mode=strict",
        )  # fmt: skip


def test_plain_http_only_when_tls_is_off_and_then_said_so() -> None:
    objs = render("minimal")
    spec = find(objs, "Deployment", "vgpu-extender")["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    assert "--insecure-http" in container["args"]
    assert not [a for a in container["args"] if a.startswith(("--tls-", "--client-ca"))]
    assert container["readinessProbe"]["httpGet"].get("scheme", "HTTP") == "HTTP"
    assert [p["port"] for p in find(objs, "Service", "vgpu-extender")["spec"]["ports"]] == [80]
    default = find(render(), "Deployment", "vgpu-extender")["spec"]["template"]["spec"]
    assert "--insecure-http" not in default["containers"][0]["args"]


@pytest.mark.parametrize("values", ["default", "everything", "minimal", "dra"])
def test_every_flag_the_chart_passes_is_one_the_daemons_accept(values: str) -> None:
    """The rendered args go through `vgpu`'s own parsers and flag checks (nothing runs)."""
    from vgpu.cli.main import _load, _parser
    from vgpu.daemons.extender import cli as extender_cli
    from vgpu.daemons.flags import mode as mode_flags
    from vgpu.daemons.node_agent import cli as node_cli

    objs = render(values, kube_version="v1.37.0")
    checks: dict[str, Callable[[argparse.Namespace], object]] = {
        "node-agent": lambda a: (
            mode_flags.hami_core(a),
            node_cli.watchdog_policy(a),
            mode_flags.device_list(a),
            mode_flags.container_dirs(a),
        ),
        "extender": lambda a: extender_cli._tls(a),
        "dra-driver": lambda a: mode_flags.device_list(a),
        "inspect": lambda a: a.serve or pytest.fail("the web view's Deployment does not serve"),
    }
    daemons = [
        o
        for o in objs
        if o["kind"] in {"DaemonSet", "Deployment"} and o["metadata"]["name"] != "vgpu-scheduler"
    ]
    assert len(daemons) == 3 if values in ("dra", "everything") else 2  # everything: the web view
    for daemon in daemons:
        (container,) = daemon["spec"]["template"]["spec"]["containers"]
        parser, sub = _parser()
        _load(container["args"][0], sub)
        try:
            args = parser.parse_args(container["args"])
        except SystemExit:
            pytest.fail(f"{values}: `vgpu {' '.join(container['args'])}` is refused")
        checks[args.command](args)


def test_the_enforcement_policy_follows_the_resource_domain_and_can_be_turned_off() -> None:
    policy = find(
        render(resourceDomain="gpu.example.com"),
        "ValidatingAdmissionPolicy",
        "vgpu-protect-enforcement",
    )
    asks = {v["name"]: v["expression"] for v in policy["spec"]["variables"]}["asksVgpu"]
    assert "'gpu.example.com/'" in asks and "vgpu.io" not in asks
    off = render(admissionPolicy__enforcement="false")
    assert not [o for o in off if o["metadata"]["name"] == "vgpu-protect-enforcement"]
    assert find(off, "ValidatingAdmissionPolicy", "vgpu-protect-handoff-annotations")


def test_the_node_agent_mounts_its_state_dir_only_in_modes_that_use_it() -> None:
    for mode, mounted in [
        ("auto", True),
        ("vgpu-core", True),
        ("hami", True),
        ("plain", False),
        ("mps", False),
    ]:
        agent = find(render(nodeAgent__mode=mode), "DaemonSet", "vgpu-node-agent")["spec"][
            "template"
        ]["spec"]
        paths = {v["hostPath"]["path"] for v in agent["volumes"] if "hostPath" in v}
        assert ("/var/lib/vgpu" in paths) is mounted, mode
        assert (
            any(a == "--state-dir=/var/lib/vgpu" for a in agent["containers"][0]["args"]) is mounted
        )


def test_the_dra_driver_mounts_its_state_dir_only_in_modes_that_use_it() -> None:
    for mode, mounted in [("auto", True), ("vgpu-core", True), ("hami", True), ("plain", False)]:
        objs = render(kube_version="v1.37.0", dra__enabled="true", dra__mode=mode)
        driver = find(objs, "DaemonSet", "vgpu-dra-driver")["spec"]["template"]["spec"]
        paths = {v["hostPath"]["path"] for v in driver["volumes"] if "hostPath" in v}
        assert ("/var/lib/vgpu" in paths) is mounted, mode
        args = driver["containers"][0]["args"]
        assert f"--mode={mode}" in args
        assert ("--state-dir=/var/lib/vgpu" in args) is mounted, mode


def test_dra_mode_renders_the_driver_its_rbac_and_the_device_class() -> None:
    assert not [o for o in render() if "dra" in o["metadata"]["name"]]
    objs = render(kube_version="v1.37.0", dra__enabled="true", memoryUnitMiB="512")
    assert find(objs, "DeviceClass", "vgpu.io")["spec"]["selectors"] == [
        {"cel": {"expression": 'device.driver == "vgpu.io"'}}
    ]
    driver = find(objs, "DaemonSet", "vgpu-dra-driver")["spec"]["template"]["spec"]
    args = driver["containers"][0]["args"]
    assert args[0] == "dra-driver" and "--memory-unit-mib=512" in args
    assert "--slice-order=index" in args
    assert driver["nodeSelector"] == {"vgpu.io/mode": "dra"}
    assert driver["serviceAccountName"] == "vgpu-dra-driver"
    rules = find(objs, "ClusterRole", "vgpu-dra-driver")["rules"]
    assert {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"],
            "verbs": ["get", "list", "watch"]} in rules  # fmt: skip
    policy = find(objs, "ValidatingAdmissionPolicy", "vgpu-dra-claims")["spec"]
    assert policy["matchConstraints"]["resourceRules"][0]["resources"] == [
        "resourceclaims",
        "resourceclaimtemplates",
    ]
    assert find(objs, "ValidatingAdmissionPolicyBinding", "vgpu-dra-claims")
    with pytest.raises(chart.ChartError, match=r"DRA mode needs 1\.36 or later"):
        render(kube_version="v1.33.0", dra__enabled="true")
    with pytest.raises(chart.ChartError, match=r"dra[./]sliceOrder"):
        render(kube_version="v1.37.0", dra__enabled="true", dra__sliceOrder="random")


def test_a_node_agent_may_update_only_its_own_node_and_its_pods() -> None:
    """The agents' ClusterRole names no node; the admission policy binds an agent's
    request to the node its token names (`authentication.kubernetes.io/node-name`)."""
    objs = render()
    policy = find(objs, "ValidatingAdmissionPolicy", "vgpu-node-agent-own-node")["spec"]
    assert policy["failurePolicy"] == "Fail"
    (rule,) = policy["matchConstraints"]["resourceRules"]
    assert set(rule["resources"]) >= {"nodes", "pods"} and rule["operations"] == ["UPDATE"]
    (condition,) = policy["matchConditions"]
    assert "system:serviceaccount:gpu:vgpu-node-agent" in condition["expression"]
    text = yaml.safe_dump(policy)
    assert "authentication.kubernetes.io/node-name" in text
    assert "oldObject.spec.nodeName" in text and "oldObject.metadata.name" in text
    binding = find(objs, "ValidatingAdmissionPolicyBinding", "vgpu-node-agent-own-node")
    assert binding["spec"]["validationActions"] == ["Deny"]
    names = {o["metadata"]["name"] for o in render(admissionPolicy__agentOwnNodeOnly="false")}
    assert "vgpu-node-agent-own-node" not in names


def test_helm_template_without_a_kube_version_renders_as_daemonset_does() -> None:
    """Helm assumes Kubernetes v1.20.0 when it asks no cluster; the chart's kubeVersion once
    refused that, so `helm template vgpu charts/vgpu` failed. It renders, with daemonset/'s
    kube-scheduler tag (the cluster's version is unknown), and a real old cluster is refused."""
    objs = [
        d for d in yaml.safe_load_all(chart.run_helm("template", "vgpu", str(chart.CHART))) if d
    ]
    scheduler = find(objs, "Deployment", "vgpu-scheduler")
    (container,) = scheduler["spec"]["template"]["spec"]["containers"]
    assert container["image"] == f"registry.k8s.io/kube-scheduler:{chart.KUBE_VERSION}"
    with pytest.raises(chart.ChartError, match=r"incompatible with Kubernetes v1\.29\.0"):
        render(kube_version="v1.29.0")
