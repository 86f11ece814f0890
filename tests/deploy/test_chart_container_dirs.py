"""`nodeAgent.containerDirs.size`: a privileged init container puts each node daemon's container
directories on a tmpfs of that size before the daemon starts (the shared files' hard bound,
docs/isolation.md). The rendered script itself is run in a mount namespace of the test's own
(`unshare -rm`): it mounts the tmpfs over an empty directory, keeps an existing mount and leaves
a directory that containers use alone.

`nodeAgent.containerDirs.perContainerTmpfs` (on by default): each daemon mounts a tmpfs of its
own over each container directory itself (`--container-dir-tmpfs`), so only then does it run
privileged with Bidirectional propagation on its state directory."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.deploy.test_chart import _helm_or_skip, find, render

AGENT = ("DaemonSet", "vgpu-node-agent")
DRIVER = ("DaemonSet", "vgpu-dra-driver")
SIZE = 1 << 20
FACTS = """
import json, sys
from pathlib import Path
from vgpu.adapters.shared_files import mount_facts
f = mount_facts(Path(sys.argv[1]))
print(json.dumps({"own": f.own, "fstype": f.fstype, "size": f.size}))
"""


@pytest.fixture(autouse=True)
def _needs_helm() -> None:
    _helm_or_skip()


def _inits(objs: list[dict[str, Any]], which: tuple[str, str]) -> list[dict[str, Any]]:
    inits: list[dict[str, Any]] = find(objs, *which)["spec"]["template"]["spec"].get(
        "initContainers", []
    )
    return inits


def _sized(size: str = "1m") -> list[dict[str, Any]]:
    return render(
        kube_version="v1.37.0",
        dra__enabled="true",
        dra__mode="vgpu-core",
        nodeAgent__containerDirs__size=size,
    )


def test_without_a_size_no_daemon_gets_the_privileged_init_container() -> None:
    objs = render(kube_version="v1.37.0", dra__enabled="true", dra__mode="vgpu-core")
    assert _inits(objs, AGENT) == [] and _inits(objs, DRIVER) == []


def test_with_a_size_each_daemon_mounts_its_own_directories_before_it_starts() -> None:
    objs = _sized()
    for which, path in (
        (AGENT, "/var/lib/vgpu/containers"),
        (DRIVER, "/var/lib/vgpu/dra/containers"),
    ):
        (init,) = _inits(objs, which)
        assert init["command"][-2:] == [path, "1m"], which
        assert init["securityContext"]["privileged"] is True
        (mount,) = init["volumeMounts"]
        assert (mount["mountPath"], mount["mountPropagation"]) == ("/var/lib/vgpu", "Bidirectional")


def test_a_size_tmpfs_cannot_read_is_refused_naming_the_value() -> None:
    import chart  # hack/chart.py, on the path once tests.deploy.test_chart is imported

    with pytest.raises(chart.ChartError, match=r"containerDirs\.size"):
        _sized("1Gi")


def _run(script: list[str], directory: Path) -> tuple[str, dict[str, Any]]:
    """The init container's command on `directory` in a mount namespace of our own, then what
    `mount_facts` sees there: (its output, the facts)."""
    shell, flag, body, name, _, size = script
    both = f'{shell} {flag} "$0" {name} "$1" {size} && {sys.executable} -c "$2" "$1"'
    out = subprocess.run(
        ["unshare", "-rm", "sh", "-c", both, body, str(directory), FACTS],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    said, _, facts = out.stdout.rpartition("\n{")
    return said, json.loads("{" + facts)


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare (util-linux)")
def test_the_init_script_mounts_a_sized_tmpfs_over_an_empty_directory_only(
    tmp_path: Path,
) -> None:
    (init,) = _inits(_sized(), AGENT)
    script = init["command"]
    probe = subprocess.run(["unshare", "-rm", "true"], check=False, capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"no user and mount namespaces here: {probe.stderr.decode().strip()}")
    empty = tmp_path / "empty"
    said, facts = _run(script, empty)
    assert "a tmpfs of size=1m mounted" in said
    assert facts == {"own": True, "fstype": "tmpfs", "size": SIZE}
    used = tmp_path / "used"
    (used / "0123").mkdir(parents=True)  # a running container's directory
    said, facts = _run(script, used)
    assert "not empty (containers use it), left as is" in said and not facts["own"]


def _daemon(objs: list[dict[str, Any]], which: tuple[str, str]) -> dict[str, Any]:
    (container,) = find(objs, *which)["spec"]["template"]["spec"]["containers"]
    return dict(container)


def _state_mount(container: dict[str, Any]) -> dict[str, Any]:
    (mount,) = [m for m in container["volumeMounts"] if m["name"] == "state"]
    return dict(mount)


def test_without_a_tmpfs_per_container_the_daemons_get_no_mount_rights() -> None:
    objs = render(
        kube_version="v1.37.0",
        dra__enabled="true",
        dra__mode="vgpu-core",
        nodeAgent__containerDirs__perContainerTmpfs="false",
    )
    for which in (AGENT, DRIVER):
        daemon = _daemon(objs, which)
        assert "--container-dir-tmpfs" not in daemon["args"], which
        assert "privileged" not in daemon["securityContext"], which
        assert daemon["securityContext"]["allowPrivilegeEscalation"] is False, which
        assert "mountPropagation" not in _state_mount(daemon), which


def test_by_default_each_daemon_gets_a_tmpfs_per_container_and_mount_rights() -> None:
    objs = render(kube_version="v1.37.0", dra__enabled="true", dra__mode="vgpu-core")
    for which in (AGENT, DRIVER):
        daemon = _daemon(objs, which)
        assert "--container-dir-tmpfs" in daemon["args"], which
        assert daemon["securityContext"]["privileged"] is True, which
        assert "allowPrivilegeEscalation" not in daemon["securityContext"], which
        assert _state_mount(daemon)["mountPropagation"] == "Bidirectional", which


def test_modes_without_container_directories_get_no_mount_rights() -> None:
    objs = render(nodeAgent__mode="mps", nodeAgent__containerDirs__perContainerTmpfs="true")
    daemon = _daemon(objs, AGENT)
    assert "--container-dir-tmpfs" not in daemon["args"]
    assert "privileged" not in daemon["securityContext"]


def test_a_tmpfs_per_container_that_is_not_a_boolean_is_refused_naming_it() -> None:
    import chart  # hack/chart.py, on the path once tests.deploy.test_chart is imported

    with pytest.raises(chart.ChartError, match=r"perContainerTmpfs"):
        render(nodeAgent__containerDirs__perContainerTmpfs="sometimes")
