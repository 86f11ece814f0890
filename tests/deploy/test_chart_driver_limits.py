"""The chart gives a node daemon what the driver memory backend needs (docs/isolation.md,
"Driver memory limits"): the host's cgroup v2 tree, read-only at the host's path, and
CAP_SYS_ADMIN for NVML's memory-limit calls; `driverMemoryLimits.mode: off` takes both away.
Without the mount a chart install's `auto` always fell back: inside its own cgroup namespace the
daemon sees no kubepods cgroup."""

from __future__ import annotations

from typing import Any

import pytest

from tests.deploy.test_chart import _helm_or_skip, find, render

AGENT = ("DaemonSet", "vgpu-node-agent")
DRIVER = ("DaemonSet", "vgpu-dra-driver")


@pytest.fixture(autouse=True)
def _needs_helm() -> None:
    _helm_or_skip()


def _pod(objs: list[dict[str, Any]], which: tuple[str, str]) -> dict[str, Any]:
    spec: dict[str, Any] = find(objs, *which)["spec"]["template"]["spec"]
    return spec


def _cgroup_mounts(pod: dict[str, Any]) -> list[tuple[str, str, bool]]:
    """(host path, mount path, read-only) of each hostPath volume named host-cgroup."""
    volumes = {v["name"]: v for v in pod["volumes"]}
    (container,) = pod["containers"]
    return [
        (volumes[m["name"]]["hostPath"]["path"], m["mountPath"], bool(m.get("readOnly")))
        for m in container.get("volumeMounts", [])
        if m["name"] == "host-cgroup"
    ]


def _added(pod: dict[str, Any]) -> list[str]:
    (container,) = pod["containers"]
    added: list[str] = container["securityContext"]["capabilities"].get("add", [])
    return added


def test_by_default_the_agent_sees_the_host_cgroup_tree_read_only_and_may_set_limits() -> None:
    pod = _pod(render(), AGENT)
    args = pod["containers"][0]["args"]
    assert "--driver-memory-limits=auto" in args and "--cgroupfs=/sys/fs/cgroup" in args
    assert _cgroup_mounts(pod) == [("/sys/fs/cgroup", "/sys/fs/cgroup", True)]
    assert _added(pod) == ["SYS_ADMIN"]
    assert pod["containers"][0]["securityContext"]["capabilities"]["drop"] == ["ALL"]


def test_driver_limits_off_gives_the_agent_neither_the_cgroup_tree_nor_sys_admin() -> None:
    pod = _pod(render(nodeAgent__driverMemoryLimits__mode="off"), AGENT)
    args = pod["containers"][0]["args"]
    assert "--driver-memory-limits=off" in args
    assert not [a for a in args if a.startswith(("--cgroupfs", "--driver-soft-limits"))]
    assert _cgroup_mounts(pod) == []
    assert _added(pod) == []
    killing = _pod(
        render(nodeAgent__driverMemoryLimits__mode="off", **{"nodeAgent__watchdog__kill": "true"}),
        AGENT,
    )
    assert _added(killing) == ["KILL"]


def test_a_moved_cgroup_tree_is_mounted_and_named_at_the_hosts_path() -> None:
    pod = _pod(render("everything"), AGENT)
    args = pod["containers"][0]["args"]
    assert "--driver-memory-limits=on" in args and "--driver-soft-limits" in args
    assert "--cgroupfs=/host/sys/fs/cgroup" in args
    assert _cgroup_mounts(pod) == [("/host/sys/fs/cgroup", "/host/sys/fs/cgroup", True)]
    assert sorted(_added(pod)) == ["KILL", "SYS_ADMIN"]


@pytest.mark.parametrize(("mode", "mounted"), [("off", False), ("auto", True), ("on", True)])
def test_the_dra_driver_gets_the_cgroup_tree_and_sys_admin_unless_limits_are_off(
    mode: str, mounted: bool
) -> None:
    objs = render(kube_version="v1.37.0", dra__enabled="true", dra__driverMemoryLimits__mode=mode)
    pod = _pod(objs, DRIVER)
    assert f"--driver-memory-limits={mode}" in pod["containers"][0]["args"]
    rules = find(objs, "ClusterRole", "vgpu-dra-driver")["rules"]
    reads_pods = any("pods" in r["resources"] and "get" in r["verbs"] for r in rules)
    assert reads_pods is mounted  # a claim's reserved pods and their other claims
    assert _cgroup_mounts(pod) == ([("/sys/fs/cgroup", "/sys/fs/cgroup", True)] if mounted else [])
    assert _added(pod) == (["SYS_ADMIN"] if mounted else [])


def test_the_dra_drivers_limits_are_off_unless_asked_for() -> None:
    pod = _pod(render(kube_version="v1.37.0", dra__enabled="true"), DRIVER)
    assert "--driver-memory-limits=off" in pod["containers"][0]["args"]
    assert _cgroup_mounts(pod) == [] and _added(pod) == []


@pytest.mark.parametrize(("mode", "hook"), [("on", True), ("auto", True), ("off", False)])
def test_a_plain_dra_driver_with_limits_gets_the_host_state_dir_for_its_cdi_hook(
    mode: str, hook: bool
) -> None:
    """The driver installs its CDI hook and serves the hook's socket in its state directory,
    at the host's path (the runtime runs the hook there), in every mode with its limits."""
    pod = _pod(
        render(
            kube_version="v1.37.0",
            dra__enabled="true",
            dra__mode="plain",
            dra__driverMemoryLimits__mode=mode,
        ),
        DRIVER,
    )
    (container,) = pod["containers"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounted = [m["mountPath"] for m in container["volumeMounts"] if m["name"] == "state"]
    assert ("--state-dir=/var/lib/vgpu" in container["args"]) is hook
    assert mounted == (["/var/lib/vgpu"] if hook else [])
    assert (volumes.get("state", {}).get("hostPath", {}).get("path") == "/var/lib/vgpu") is hook
