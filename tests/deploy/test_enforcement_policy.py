"""The shipped `vgpu-protect-enforcement` ValidatingAdmissionPolicy, evaluated: its CEL runs here
(cel-python) over pod specs as the API server would run it on CREATE, variables first, in order,
then the validations. A vGPU pod cannot set the interposer's variables, take unchecked envFrom,
or mount over the enforcement paths; other pods are left alone. The real API server runs the same
policy in tests/realk8s/test_enforcement.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from tests.deploy.cel import KUBE_STRINGS, cel
from tests.deploy.cel import refusals as cel_refusals
from tests.pods import pod_obj

POLICY = Path(__file__).resolve().parents[2] / "daemonset" / "enforcement-policy.yaml"
RESERVED = (
    "LD_PRELOAD",
    "VGPU_",
    "CUDA_DEVICE_MEMORY_LIMIT",
    "CUDA_DEVICE_SM_LIMIT",
    "CUDA_MPS_",
    "NVIDIA_",
)


def _policy() -> dict[str, Any]:
    docs = [d for d in yaml.safe_load_all(POLICY.read_text()) if d]
    (policy,) = [d for d in docs if d["kind"] == "ValidatingAdmissionPolicy"]
    return dict(policy)


SPEC = _policy()["spec"]


def refusals(pod: dict[str, Any]) -> list[str]:
    """The messages of the validations `pod` fails (empty: admitted)."""
    return cel_refusals(SPEC, {"object": cel(pod), "oldObject": None}, functions=KUBE_STRINGS)


def container(name: str = "main", vgpu: bool = True, **fields: Any) -> dict[str, Any]:
    c: dict[str, Any] = {"name": name, "image": "busybox", **fields}
    if vgpu:
        c["resources"] = {"limits": {"vgpu.io/cores": "30"}}
    return c


def pod(*containers: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return pod_obj("p", list(containers), namespace=None, **spec)


def test_a_plain_vgpu_pod_and_a_non_vgpu_pod_with_ld_preload_are_admitted() -> None:
    assert refusals(pod(container())) == []
    assert (
        refusals(
            pod(container(vgpu=False, env=[{"name": "LD_PRELOAD", "value": "libjemalloc.so"}]))
        )
        == []
    )


@pytest.mark.parametrize(
    "name",
    [
        "LD_PRELOAD",
        "VGPU_CORES",
        "VGPU_MODE",
        "CUDA_DEVICE_MEMORY_LIMIT_0",
        "CUDA_DEVICE_MEMORY_LIMIT",
        "CUDA_DEVICE_SM_LIMIT",
        "CUDA_DEVICE_SM_LIMIT_1",
        "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE",
        "CUDA_MPS_PIPE_DIRECTORY",
        "CUDA_DEVICE_MEMORY_SHARED_CACHE",
    ],
)
def test_a_vgpu_pod_setting_an_enforcement_variable_is_refused_naming_the_container(
    name: str,
) -> None:
    (message,) = refusals(pod(container("worker", env=[{"name": name, "value": "x"}])))
    assert "container(s) worker" in message and "remove them" in message


@pytest.mark.parametrize(
    "name",
    [
        "NVIDIA_VISIBLE_DEVICES",
        "NVIDIA_DRIVER_CAPABILITIES",
        "NVIDIA_REQUIRE_CUDA",
        "NVIDIA_DISABLE_REQUIRE",
        "NVIDIA_MIG_CONFIG_DEVICES",
        "NVIDIA_MIG_MONITOR_DEVICES",
        "NVIDIA_IMEX_CHANNELS",
    ],
)
@pytest.mark.parametrize("where", ["containers", "initContainers", "ephemeralContainers"])
def test_a_vgpu_pod_setting_an_nvidia_runtime_variable_in_any_container_is_refused(
    name: str, where: str
) -> None:
    """The NVIDIA container runtime selects GPUs and driver files from these (a
    sidecar's NVIDIA_VISIBLE_DEVICES=all gave the pod every GPU of its node)."""
    side = container("side", vgpu=False, env=[{"name": name, "value": "all"}])
    spec = pod(container(), side) if where == "containers" else pod(container(), **{where: [side]})
    (message,) = refusals(spec)
    assert "container(s) side set NVIDIA_*" in message and "CDI" in message


def test_a_pod_without_vgpu_may_set_nvidia_visible_devices() -> None:
    """Not a vGPU pod (e.g. the node agent itself): the policy leaves it alone."""
    env = [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]
    assert refusals(pod(container(vgpu=False, env=env))) == []


@pytest.mark.parametrize("where", ["initContainers", "ephemeralContainers"])
def test_init_and_ephemeral_containers_are_checked_too(where: str) -> None:
    bad = container("side", vgpu=False, env=[{"name": "LD_PRELOAD", "value": "x"}])
    assert refusals(pod(container(), **{where: [bad]}))


def test_a_vgpu_request_without_a_limit_counts_as_a_vgpu_pod() -> None:
    c = container(vgpu=False, env=[{"name": "VGPU_CORES", "value": "100"}])
    c["resources"] = {"requests": {"vgpu.io/memory": "4"}}
    assert refusals(pod(c))


@pytest.mark.parametrize(
    ("prefix", "refused"),
    [
        (None, True),
        ("", True),
        ("C", True),
        ("CUDA_M", True),
        ("CUDA_MPS_X", True),
        ("LD_", True),
        ("VGPU", True),
        ("APP_", False),
        ("CUDA_X", False),
        ("LD_PRELOADX", True),
        ("NVIDIA_", True),
        ("NV", True),
        ("NVIDIA_APP_", True),
    ],
)
def test_env_from_needs_a_prefix_clear_of_the_reserved_names(
    prefix: str | None, refused: bool
) -> None:
    source: dict[str, Any] = {"configMapRef": {"name": "cfg"}}
    if prefix is not None:
        source["prefix"] = prefix
    got = refusals(pod(container(envFrom=[source])))
    assert bool(got) is refused, got
    assert not got or "set envFrom[].prefix" in got[0]


@pytest.mark.parametrize(
    ("path", "refused"),
    [
        ("/run/vgpu", True),
        ("/run/vgpu/", True),
        ("/run/vgpu/limits", True),
        ("/run/vgpu-shared", True),
        ("/usr/local/vgpu", True),
        ("/usr/local/vgpu/libvgpu-core.so", True),
        ("/etc/ld.so.preload", True),
        ("//run/vgpu", True),
        ("/run/./vgpu", True),
        ("/x/../run/vgpu", True),
        ("/run/vgpux", False),
        ("/data", False),
        ("/etc/ld.so.preload.d", False),
    ],
)
def test_mounts_over_the_enforcement_paths_are_refused(path: str, refused: bool) -> None:
    c = container(volumeMounts=[{"name": "v", "mountPath": path}])
    got = refusals(pod(c, volumes=[{"name": "v", "emptyDir": {}}]))
    assert bool(got) is refused, got


names = st.from_regex(r"[A-Z_][A-Z0-9_]{0,30}", fullmatch=True)


@given(names)
def test_exactly_the_reserved_names_are_refused(name: str) -> None:
    got = refusals(pod(container(env=[{"name": name, "value": "1"}])))
    reserved = name.startswith(RESERVED) or name.startswith("CUDA_DEVICE_MEMORY_SHARED_CACHE")
    assert bool(got) is reserved


@pytest.mark.parametrize(
    "bad",
    [
        container(env=[{"name": "LD_PRELOAD", "value": "libjemalloc.so"}]),
        container(env=[{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]),
        container(envFrom=[{"configMapRef": {"name": "cfg"}}]),
        container(volumeMounts=[{"name": "v", "mountPath": "/run/vgpu"}]),
    ],
)
def test_every_refusal_names_the_policy_and_its_opt_out(bad: dict[str, Any]) -> None:
    """An operator reading a refusal learns which policy spoke, where it is documented, that a
    pod asking no vGPU is not checked, and the chart value that turns it off."""
    (message,) = refusals(pod(bad, volumes=[{"name": "v", "emptyDir": {}}]))
    assert "policy vgpu-protect-enforcement" in message
    assert 'docs/isolation.md "The admission policy"' in message
    assert "asks no vgpu.io resource is not checked" in message
    assert "admissionPolicy.enforcement=false" in message
