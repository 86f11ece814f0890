"""Under the driver's memory limits, each prepared claim's CDI spec carries a `createRuntime`
hook, and the driver answers it: before a container of the claim is created, the driver sets
the limit of the container's pod synchronously and answers "ok", or answers why not (the hook
then fails the container's creation). This is what makes a pod joining a prepared shared
claim wait for its limit: no prepare call comes for it.

The driver runs in-process (`tests/dra/test_claim_limits.py`'s setup); the hook's requests are
sent over its socket as `vgpu-core/hook/vgpu-cdi-hook.c` sends them (the C program itself is
tested against the same socket in `tests/isolation/test_cdi_hook.py`)."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest

from tests.dra.test_claim_limits import (
    MIB,
    Functions,
    cgroupfs,
    limited,
    pod_cgroup,
    pods_claim,
    put_pod,
    r615,
    reserve,
)
from tests.dra.test_driver import Env, env, share
from vgpu.adapters.dmem import pod_cgroup as find_pod_cgroup
from vgpu.core.errors import ConfigError
from vgpu.daemons.dra_driver.driver import DraDriver
from vgpu.daemons.dra_driver.joiners import Joiners
from vgpu.dra.hook_request import SANDBOX_NAME, SANDBOX_NAMESPACE, SANDBOX_UID
from vgpu.node.driver_mode import DriverLimits

__all__ = ["cgroupfs", "env"]  # the fixtures, used by name
WHOLE = share("gpu-0", "100", "15Gi")  # all of a T4 (15,360 MiB)


def start(env: Env, cgroupfs: Path, nvml: Functions, **overrides: Any) -> DraDriver:
    """The driver with the limits and the hook; the joiners look for cgroups once an hour and
    the periodic pass waits an hour, so only the hook can set a joining pod's limit here."""
    program = env.root / "image-hook"
    program.write_bytes(b"#!/bin/sh\n")
    settings: dict[str, Any] = {
        "driver_limits": DriverLimits.ON,
        "cgroupfs": cgroupfs,
        "resync_s": 3600,
        "join_poll_s": 3600,
        "hook_program": program,
        "state_dir": env.root / "state",
    }
    r615(env)
    earlier, env.drivers = env.drivers, []  # so that a restart keeps r615's backend
    try:
        return env.start(nvml=nvml, **(settings | overrides))
    finally:
        env.drivers[:0] = earlier


def ask(driver: DraDriver, claim_uid: str, state: dict[str, Any] | bytes) -> str:
    """What the hook does: the claim UID line, the OCI state, a half-close, the answer."""
    body = state if isinstance(state, bytes) else json.dumps(state).encode()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(10)
        conn.connect(str(driver.config.hook_socket))
        conn.sendall(claim_uid.encode() + b"\n" + body)
        conn.shutdown(socket.SHUT_WR)
        return b"".join(iter(lambda: conn.recv(4096), b"")).decode()


def oci_state(pod_uid: str, name: str = "q") -> dict[str, Any]:
    """The state runc gives a createRuntime hook, with the annotations containerd sets."""
    notes = {SANDBOX_UID: pod_uid, SANDBOX_NAMESPACE: "default", SANDBOX_NAME: name}
    return {"ociVersion": "1.2.0", "id": "c1", "status": "creating", "pid": 4242,
            "bundle": "/run/bundle", "annotations": notes}  # fmt: skip


def joined(
    env: Env,
    cgroupfs: Path,
    nvml: Functions,
    monkeypatch: pytest.MonkeyPatch,
    result: dict[str, Any] | None = None,
) -> tuple[DraDriver, str, str, Path]:
    """Claim c1 (`result`, else the whole of gpu-0, which pods may share at once) prepared for
    pod p; pod q then reserved on it and its cgroup made, with the joiners' loop doing nothing
    (as if slower than the runtime): (driver, claim UID, q's UID, q's cgroup)."""
    monkeypatch.setattr(Joiners, "step", lambda self: 0)
    driver = start(env, cgroupfs, nvml)
    c1, first = pods_claim(env, result or WHOLE)
    pod_cgroup(cgroupfs, first)
    assert env.prepare("c1", c1).error == ""
    second = put_pod(env, "q", ["c1"])
    reserve(env, "c1", ("p", first), ("q", second))
    return driver, c1, second, pod_cgroup(cgroupfs, second)


def test_a_prepared_claims_cdi_spec_runs_the_installed_hook_on_the_drivers_socket(
    env: Env, cgroupfs: Path
) -> None:
    driver = start(env, cgroupfs, Functions())
    c1, uid = pods_claim(env, share("gpu-0", "30", "2Gi"))
    pod_cgroup(cgroupfs, uid)
    assert env.prepare("c1", c1).error == ""
    spec = json.loads((env.root / "cdi" / f"vgpu.io-{c1}.json").read_text())
    installed = env.root / "state" / "bin" / "image-hook"
    assert installed.read_bytes() == b"#!/bin/sh\n" and installed.stat().st_mode & 0o111
    socket_path = str(driver.config.hook_socket)
    assert spec["containerEdits"]["hooks"] == [
        {
            "hookName": "createRuntime",
            "path": str(installed),
            "args": ["vgpu-cdi-hook", socket_path, c1, "8000"],
            "timeout": 10,
        }
    ]


def test_a_pod_joining_a_prepared_claim_has_its_limit_set_before_the_hook_answers(
    env: Env, cgroupfs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    nvml = Functions()
    driver, c1, second, cgroup = joined(env, cgroupfs, nvml, monkeypatch)
    assert not limited(nvml, cgroup)  # neither the joiners nor the pass set it
    assert ask(driver, c1, oci_state(second)) == "ok"
    assert limited(nvml, cgroup) == [(env.gpus[0], cgroup, 15360 * MIB, 0)]


def test_the_hook_finds_the_pod_from_the_containers_cgroup_without_the_annotation(
    env: Env, cgroupfs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    nvml = Functions()
    driver, c1, second, cgroup = joined(env, cgroupfs, nvml, monkeypatch)
    path = f"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{second.replace('-', '_')}.slice"
    monkeypatch.setattr(
        "vgpu.adapters.procfs.ProcCgroupReader.read",
        lambda self, pid: f"0::{path}/cri-containerd-abc.scope\n" if pid == 4242 else None,
    )
    state = oci_state(second)
    del state["annotations"]
    assert ask(driver, c1, state) == "ok"
    assert limited(nvml, cgroup)


def crio_state(pod_uid: str, name: str, pod_annotations: dict[str, str]) -> dict[str, Any]:
    """The state runc gives a createRuntime hook under CRI-O: the pod's annotations carried over,
    CRI-O's own, then the kubelet's container labels, written last (CRI-O
    `internal/factory/container/container.go`, `SpecAddAnnotations`; Kubernetes
    `pkg/kubelet/kuberuntime/labels.go`, `newContainerLabels`)."""
    labels = {"io.kubernetes.pod.name": name, "io.kubernetes.pod.namespace": "default",
              "io.kubernetes.pod.uid": pod_uid, "io.kubernetes.container.name": "main"}  # fmt: skip
    notes = {**pod_annotations, "io.container.manager": "cri-o",
             "io.kubernetes.cri-o.SandboxID": "f" * 64,
             "io.kubernetes.cri-o.Labels": json.dumps(labels), **labels}  # fmt: skip
    return {"ociVersion": "1.2.0", "id": "c1", "status": "creating", "pid": 4242,
            "bundle": "/run/bundle", "annotations": notes}  # fmt: skip


def test_under_cri_o_the_pod_is_found_from_the_kubelets_labels_it_copies(
    env: Env, cgroupfs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    nvml = Functions()
    driver, c1, second, cgroup = joined(env, cgroupfs, nvml, monkeypatch)
    assert ask(driver, c1, crio_state(second, "q", {})) == "ok"
    assert limited(nvml, cgroup) == [(env.gpus[0], cgroup, 15360 * MIB, 0)]


def test_a_pod_annotation_naming_another_pod_of_the_claim_is_refused(
    env: Env, cgroupfs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tenant's pod annotations reach its containers' under CRI-O: one naming the claim's
    other pod (whose cgroup is already limited) must not let this container start unlimited."""
    nvml = Functions()
    driver, c1, second, cgroup = joined(env, cgroupfs, nvml, monkeypatch)
    first = str((env.api.store.get("Pod", "default", "p") or {})["metadata"]["uid"])
    forged = crio_state(second, "q", {SANDBOX_UID: first})
    answer = ask(driver, c1, forged)
    assert "name different pods" in answer and "one was not the runtime's" in answer
    assert not limited(nvml, cgroup)


def test_a_pod_the_claim_is_not_reserved_for_is_refused_and_gets_no_limit(
    env: Env, cgroupfs: Path
) -> None:
    nvml = Functions()
    driver = start(env, cgroupfs, nvml)
    c1, first = pods_claim(env, share("gpu-0", "30", "2Gi"))
    pod_cgroup(cgroupfs, first)
    assert env.prepare("c1", c1).error == ""
    stranger = put_pod(env, "s", [])
    cgroup = pod_cgroup(cgroupfs, stranger)
    answer = ask(driver, c1, oci_state(stranger, "s"))
    assert answer.startswith("claim default/c1 is not reserved for pod default/s")
    assert not limited(nvml, cgroup)


def test_a_claim_not_prepared_here_and_a_bad_request_are_refused_with_their_cause(
    env: Env, cgroupfs: Path
) -> None:
    driver = start(env, cgroupfs, Functions())
    uid = "0f0f0f0f-0000-4000-8000-000000000001"
    assert ask(driver, uid, oci_state(uid)) == f"claim {uid} is not prepared on this node"
    assert "not JSON" in ask(driver, uid, b"{")
    assert "is not a pod UID" in ask(driver, uid, {"annotations": {SANDBOX_UID: "x/../y"}})


def test_a_limit_the_driver_refuses_fails_the_hook_with_its_cause(
    env: Env, cgroupfs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    nvml = Functions()
    driver, c1, second, _ = joined(env, cgroupfs, nvml, monkeypatch)
    nvml.fail = "NVML nvmlDeviceSetMemoryLimits_v1 failed: No permission"
    answer = ask(driver, c1, oci_state(second))
    assert "No permission" in answer and "pod q" in answer and env.gpus[0] in answer


def test_without_the_driver_limits_no_hook_is_written_and_no_socket_served(
    env: Env, cgroupfs: Path
) -> None:
    """Nothing to wait for: a hook would only add a way for containers to fail."""
    driver = start(env, cgroupfs, Functions(), driver_limits=DriverLimits.OFF)
    c1 = env.put_claim("c1", share("gpu-0", "30", "2Gi"))
    assert env.prepare("c1", c1).error == ""
    spec = json.loads((env.root / "cdi" / f"vgpu.io-{c1}.json").read_text())
    assert "containerEdits" not in spec
    assert not driver.config.hook_socket.exists()
    assert not (env.root / "state" / "bin").exists()


def test_a_restart_rewrites_the_prepared_claims_specs_for_the_hook_it_now_serves(
    env: Env, cgroupfs: Path
) -> None:
    """A spec from the checkpoint must not name a socket no one serves any more (each of the
    claim's containers would fail), nor lack the hook the limits now need."""
    driver = start(env, cgroupfs, Functions())
    c1, uid = pods_claim(env, share("gpu-0", "30", "2Gi"))
    pod_cgroup(cgroupfs, uid)
    assert env.prepare("c1", c1).error == ""
    spec_file = env.root / "cdi" / f"vgpu.io-{c1}.json"
    driver.stop()
    start(env, cgroupfs, Functions(), driver_limits=DriverLimits.OFF)
    assert "containerEdits" not in json.loads(spec_file.read_text())
    env.drivers[-1].stop()
    again = start(env, cgroupfs, Functions())
    hooks = json.loads(spec_file.read_text())["containerEdits"]["hooks"]
    assert [h["args"][1:3] for h in hooks] == [[str(again.config.hook_socket), c1]]
    assert env.prepare("c1", c1).error == ""  # answered from the checkpoint, hook kept
    assert json.loads(spec_file.read_text())["containerEdits"]["hooks"] == hooks


def test_the_driver_limits_do_not_run_without_the_hook_program(env: Env, cgroupfs: Path) -> None:
    with pytest.raises(ConfigError, match=r"--cdi-hook-program: cannot read .*/missing"):
        start(env, cgroupfs, Functions(), hook_program=env.root / "missing")


def test_a_second_pod_sharing_a_claims_part_of_a_gpu_is_refused_while_the_first_runs(
    env: Env, cgroupfs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The driver's limit is per pod cgroup, and pods are sibling cgroups with no common
    ancestor to limit: two pods sharing a 2 GiB claim would each get 2 GiB, N pods N times the
    claim (a claim may be reserved for 256), and the GPU's other claims run out. So a claim
    holding part of a GPU is used by one pod at a time on the node: the joiner's container is
    refused while the first pod is there, and starts once it has ended."""
    nvml = Functions()
    driver, c1, second, cgroup = joined(
        env, cgroupfs, nvml, monkeypatch, share("gpu-0", "30", "2Gi")
    )
    answer = ask(driver, c1, oci_state(second))
    assert answer.startswith("claim default/c1: it holds 2048 MiB of GPU"), answer
    assert "pod p uses it on this node" in answer and "ResourceClaimTemplate" in answer
    first = str((env.api.store.get("Pod", "default", "p") or {})["metadata"]["uid"])
    gone = find_pod_cgroup(first, cgroupfs)
    assert gone is not None
    gone.rmdir()  # the first pod has ended
    assert ask(driver, c1, oci_state(second)) == "ok"
    assert limited(nvml, cgroup)[-1] == (env.gpus[0], cgroup, 2048 * MIB, 0)


def test_pods_sharing_a_claim_of_whole_gpus_each_start_limited_to_the_gpu(
    env: Env, cgroupfs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A claim of a whole GPU leaves no other claim on it: its pods may share it at once."""
    nvml = Functions()
    driver, c1, second, cgroup = joined(env, cgroupfs, nvml, monkeypatch, WHOLE)
    assert ask(driver, c1, oci_state(second)) == "ok"
    assert limited(nvml, cgroup) == [(env.gpus[0], cgroup, 15360 * MIB, 0)]
