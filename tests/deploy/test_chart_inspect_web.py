"""The chart's `inspect.web`: off by default; on, a Deployment serving `vgpu inspect --serve` on
all addresses with the read-only ClusterRole vgpu-inspect, behind a ClusterIP Service."""

from __future__ import annotations

import pytest

from tests.deploy.test_chart import Obj, _helm_or_skip, find, render

WEB = "vgpu-inspect-web"


@pytest.fixture(autouse=True)
def _needs_helm() -> None:
    _helm_or_skip()


def _web(objs: list[Obj]) -> list[Obj]:
    return [o for o in objs if o["metadata"]["name"] == WEB]


def test_the_web_view_is_off_by_default() -> None:
    assert _web(render()) == []
    assert _web(render("minimal")) == []


def test_on_it_serves_the_report_on_all_addresses_with_the_read_only_role() -> None:
    from vgpu.cli.main import _load, _parser

    objs = render(inspect__web__enabled="true", inspect__web__port="9090")
    assert sorted(o["kind"] for o in _web(objs)) == [
        "ClusterRoleBinding", "Deployment", "NetworkPolicy", "Service", "ServiceAccount"
    ]  # fmt: skip
    spec = find(objs, "Deployment", WEB)["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    parser, sub = _parser()
    _load(container["args"][0], sub)
    args = parser.parse_args(container["args"])
    assert (args.serve, args.address, args.port) == (True, "0.0.0.0", 9090)
    assert args.extender_lease == "gpu/vgpu-extender"
    assert args.queues_config == "gpu/vgpu-queues"
    assert args.prometheus is None  # the view's own samples unless a Prometheus is named
    url = "http://prometheus.monitoring:9090"
    objs = render(inspect__web__enabled="true", inspect__web__prometheusURL=url)
    (container,) = find(objs, "Deployment", WEB)["spec"]["template"]["spec"]["containers"]
    assert f"--prometheus={url}" in container["args"]
    assert spec["serviceAccountName"] == WEB
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    binding = find(objs, "ClusterRoleBinding", WEB)
    assert binding["roleRef"]["name"] == "vgpu-inspect"
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": WEB, "namespace": "gpu"}]
    service = find(objs, "Service", WEB)["spec"]
    assert service["type"] == "ClusterIP" and service["ports"][0]["targetPort"] == "http"


def test_no_pod_reaches_the_view_unless_named_by_default_port_forward_does() -> None:
    """The view shows every team's pod names, namespaces, shares and waiting reasons. Its
    Service is a ClusterIP one, but any pod on the cluster network reached it (and every tenant
    read every other team's pods through it) while the chart's NetworkPolicies were on: only
    the peers in `inspect.web.allowFrom` (an authenticating proxy) may now connect;
    `kubectl port-forward` enters the pod's own network namespace and the kubelet probes from
    the node, so neither is affected."""
    objs = render(inspect__web__enabled="true")
    policy = find(objs, "NetworkPolicy", WEB)["spec"]
    assert policy["podSelector"] == find(objs, "Deployment", WEB)["spec"]["selector"]
    assert policy["policyTypes"] == ["Ingress"] and policy["ingress"] == []

    proxy = {"inspect__web__allowFrom[0]__podSelector__matchLabels__app": "oauth2-proxy"}
    policy = find(render(inspect__web__enabled="true", **proxy), "NetworkPolicy", WEB)["spec"]
    assert policy["ingress"] == [
        {"from": [{"podSelector": {"matchLabels": {"app": "oauth2-proxy"}}}],
         "ports": [{"port": "http", "protocol": "TCP"}]}
    ]  # fmt: skip

    off = render(inspect__web__enabled="true", networkPolicy__enabled="false")
    assert [o for o in _web(off) if o["kind"] == "NetworkPolicy"] == []


def test_it_places_waiting_pods_with_the_extenders_policies() -> None:
    """Where a waiting pod could go is placed as the extender places: its --policy and each
    --allow-pod-policy, the same values."""
    objs = render(inspect__web__enabled="true", extender__policy="binpack",
                  extender__allowPodPolicies="{spread,default:online=false}")  # fmt: skip
    (web,) = find(objs, "Deployment", WEB)["spec"]["template"]["spec"]["containers"]
    (extender,) = find(objs, "Deployment", "vgpu-extender")["spec"]["template"]["spec"][
        "containers"
    ]
    policies = [a for a in web["args"] if a.startswith(("--policy=", "--allow-pod-policy="))]
    assert policies == [
        "--policy=binpack", "--allow-pod-policy=spread", "--allow-pod-policy=default:online=false"
    ]  # fmt: skip
    assert set(policies) <= set(extender["args"])


def test_the_role_it_is_bound_to_only_reads() -> None:
    objs = render(kube_version="v1.37.0", inspect__web__enabled="true", dra__enabled="true")
    role = find(objs, "ClusterRole", "vgpu-inspect")
    verbs = {v for rule in role["rules"] for v in rule["verbs"]}
    assert verbs <= {"get", "list"}


def test_it_refuses_to_render_without_the_read_only_role() -> None:
    import chart

    with pytest.raises(chart.ChartError, match=r"inspect\.web\.enabled needs inspectRole\.enabled"):
        render(inspect__web__enabled="true", inspectRole__enabled="false")


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("inspect.web.port", "0"),
        ("inspect.web.colour", "x"),
        ("inspect.web.prometheusURL", "prom:9090"),
    ],
)
def test_bad_web_values_name_the_field(key: str, value: str) -> None:
    import chart

    with pytest.raises(chart.ChartError, match="inspect"):
        render(**{key.replace(".", "__"): value})
