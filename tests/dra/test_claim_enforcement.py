"""Mode vgpu-core in the DRA driver: a prepared claim's CDI edits carry the interposer's mounts and
`LD_PRELOAD`, its limits file holds the claim's share, and its directories are gone once the
kubelet unprepares it (or a preparation fails, or the driver restarts after a crash)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.dra.test_driver import Env, share
from tests.dra.test_driver import env as env  # the fixture
from tests.dra.test_prepare import INV, NODE, claim, result
from tests.waiting import holds_within
from vgpu.adapters.container_dirs import ContainerDirs, claim_dirs, read_limits
from vgpu.dra.claim_dirs import DRA_SUBDIR, dir_ids
from vgpu.dra.prepare import NodeGpus, PreparedClaim, prepare_claim
from vgpu.node.container_dirs import DirBounds
from vgpu.node.grants import GrantMode, GrantSettings, Refusal
from vgpu.node.limits_file import STATE_NAME, DeviceLimit
from vgpu.node.shared_bound import STATE_BYTES
from vgpu.node.vgpucore import (
    ACTIVITY_IN_CONTAINER,
    LIBRARY_IN_CONTAINER,
    LIMITS_IN_CONTAINER,
    PRELOAD_IN_CONTAINER,
    STATE_IN_CONTAINER,
    VgpuCore,
)

LIB, PRELOAD = "/var/lib/vgpu/lib/libvgpu-core.so", "/var/lib/vgpu/lib/ld.so.preload"
GIB = 1 << 30


def settings(state: Path, dirs: ContainerDirs | None = None) -> GrantSettings:
    core = VgpuCore(LIB, PRELOAD, dirs or claim_dirs(state))
    return GrantSettings(GrantMode.VGPU_CORE, core=core)


def edits(spec: dict[str, Any]) -> tuple[dict[str, str], dict[str, tuple[str, list[str]]]]:
    (device,) = spec["devices"]
    edit = device["containerEdits"]
    env = dict(e.split("=", 1) for e in edit["env"])
    mounts = {m["containerPath"]: (m["hostPath"], m["options"]) for m in edit["mounts"]}
    return env, mounts


def test_a_claim_share_gets_the_interposer_and_its_limits_in_the_cdi_edits(
    tmp_path: Path,
) -> None:
    node = NodeGpus(NODE.pool, NODE.gpus, settings(tmp_path))
    out = prepare_claim(claim(result("gpu-2", cores="30", memory="8Gi")), "uid-1", node)
    assert isinstance(out, PreparedClaim)
    env, mounts = edits(dict(out.cdi_spec))
    assert env["LD_PRELOAD"] == LIBRARY_IN_CONTAINER
    assert mounts[LIBRARY_IN_CONTAINER] == (LIB, ["rbind", "ro"])
    assert mounts[PRELOAD_IN_CONTAINER] == (PRELOAD, ["rbind", "ro"])
    limits, options = mounts[LIMITS_IN_CONTAINER]
    assert options == ["rbind", "ro"] and mounts[STATE_IN_CONTAINER][1] == ["rbind", "rw"]
    assert mounts[ACTIVITY_IN_CONTAINER][1] == ["rbind", "rw"]
    assert Path(limits).parent.parent == tmp_path / "dra" / "containers"
    # No elastic duty runs for claims: the allowance is the guarantee, and so is the limit.
    assert read_limits(Path(limits)) == (DeviceLimit(INV.gpus[2].uuid, 8 * GIB, 30, 30, 30),)
    assert len(dir_ids(out)) == 1


def test_a_whole_gpu_claim_is_limited_to_the_gpu(tmp_path: Path) -> None:
    node = NodeGpus(NODE.pool, NODE.gpus, settings(tmp_path))
    out = prepare_claim(claim(result("gpu-1")), "uid-1", node)
    assert isinstance(out, PreparedClaim)
    _, mounts = edits(dict(out.cdi_spec))
    gpu = INV.gpus[1]
    assert read_limits(Path(mounts[LIMITS_IN_CONTAINER][0])) == (
        DeviceLimit(gpu.uuid, gpu.memory_mib << 20, 100, 100, 100),
    )


def _dirs(root: Path) -> set[str]:
    base = root / "state" / "dra" / "containers"
    return {p.name for p in base.iterdir()} if base.exists() else set()


def _spec_dirs(env: Env, uid: str) -> frozenset[str]:
    spec = json.loads((env.root / "cdi" / f"vgpu.io-{uid}.json").read_text())
    return dir_ids(PreparedClaim(uid, "default", "c", (), spec))


def _start(env: Env, max_dirs: int | None = None) -> None:
    state = env.root / "state"
    dirs = claim_dirs(state)
    if max_dirs is not None:
        dirs = ContainerDirs(dirs.root.parent, grace_s=0.0, max_dirs=max_dirs)
    env.start(grants=settings(state, dirs), dirs=dirs)


def test_unprepare_removes_the_claims_directories_and_only_those(env: Env) -> None:
    _start(env)
    first = env.put_claim("c1", share("gpu-0", "30", "2Gi"))
    second = env.put_claim("c2", share("gpu-1", "50", "4Gi"))
    assert env.prepare("c1", first).error == "" and env.prepare("c2", second).error == ""
    mine, theirs = _spec_dirs(env, first), _spec_dirs(env, second)
    assert _dirs(env.root) == mine | theirs and len(mine) == len(theirs) == 1
    assert env.prepare("c1", first).error == ""  # again: the same answer, no new directory
    assert _dirs(env.root) == mine | theirs
    assert env.unprepare("c1", first) == ""
    assert _dirs(env.root) == theirs


def test_a_refused_preparation_leaves_no_directory(env: Env) -> None:
    _start(env, max_dirs=1)  # room for one request's directory, and the claim has two
    first, second = ({**share(f"gpu-{i}", "30", "2Gi"), "request": r} for i, r in enumerate("ab"))
    uid = env.put_claim("c1", first, second)  # request a is prepared before b is refused
    error = env.prepare("c1", uid).error
    assert "request b" in error and "not admitted unenforced" in error, error
    assert _dirs(env.root) == set()


def test_a_restart_keeps_prepared_claims_directories_and_drops_strays(env: Env) -> None:
    _start(env)
    uid = env.put_claim("c1", share("gpu-0", "30", "2Gi"))
    assert env.prepare("c1", uid).error == ""
    kept = _spec_dirs(env, uid)
    env.drivers[-1].stop()
    stray = claim_dirs(env.root / "state").create(None)  # a crash before the checkpoint
    assert _dirs(env.root) == kept | {stray}
    _start(env)
    assert _dirs(env.root) == kept
    assert env.unprepare("c1", uid) == "" and _dirs(env.root) == set()


def test_a_claims_grown_shared_state_is_cut_back_while_the_claim_is_prepared(env: Env) -> None:
    """Every container using the claim writes its shared files, on the node's disk outside the
    kubelet's accounting, for as long as the claim is prepared: the driver cuts them back to
    the library's layout periodically (`vgpu.node.shared_bound`), as the node agent does."""
    state = env.root / "state"
    dirs = claim_dirs(state)
    env.start(grants=settings(state, dirs), dirs=dirs, trim_s=0.05)
    uid = env.put_claim("c1", share("gpu-0", "30", "2Gi"))
    assert env.prepare("c1", uid).error == ""
    (cid,) = _spec_dirs(env, uid)
    grown = dirs.shared_dir(cid) / STATE_NAME
    with grown.open("wb") as f:
        f.truncate(STATE_BYTES + (64 << 20))
    assert holds_within(lambda: grown.stat().st_size == STATE_BYTES), grown.stat().st_size


def _reserved(obj: dict[str, Any], namespace: str, pod_uid: str) -> dict[str, Any]:
    """The claim in `namespace`, reserved for the pod `pod_uid` (as the scheduler leaves it)."""
    obj["metadata"]["namespace"] = namespace
    obj["status"]["reservedFor"] = [{"resource": "pods", "name": "p", "uid": pod_uid}]
    return obj


def _bounded(tmp_path: Path, namespace: int, pod: int) -> NodeGpus:
    bounds = DirBounds(node=100, namespace=namespace, pod=pod)
    dirs = ContainerDirs(tmp_path / DRA_SUBDIR, grace_s=0.0, bounds=bounds)
    return NodeGpus(NODE.pool, NODE.gpus, settings(tmp_path, dirs))


def test_claim_directories_are_bounded_per_namespace_and_another_namespace_still_prepares(
    tmp_path: Path,
) -> None:
    """One tenant's claims cannot take every directory of the node: the device plugin's
    per-namespace bound holds for claims too."""
    node = _bounded(tmp_path, namespace=2, pod=2)
    share_ = result("gpu-0", cores="10", memory="1Gi")
    for i in range(2):
        out = prepare_claim(_reserved(claim(share_, uid=f"a{i}"), "a", f"pod-{i}"), f"a{i}", node)
        assert isinstance(out, PreparedClaim)
    refused = prepare_claim(_reserved(claim(share_, uid="a2"), "a", "pod-2"), "a2", node)
    assert isinstance(refused, Refusal)
    assert "for namespace a (the bound is 2 per namespace)" in refused.reason, refused.reason
    other = prepare_claim(_reserved(claim(share_, uid="b0"), "b", "pod-9"), "b0", node)
    assert isinstance(other, PreparedClaim)


def test_claim_directories_are_bounded_per_pod(tmp_path: Path) -> None:
    """A pod's claims together hold at most the per-pod bound of directories (one per request)."""
    node = _bounded(tmp_path, namespace=10, pod=2)
    shares = [result(f"gpu-{i}", request=f"r{i}", cores="10", memory="1Gi") for i in range(3)]
    refused = prepare_claim(_reserved(claim(*shares, uid="c0"), "a", "pod-0"), "c0", node)
    assert isinstance(refused, Refusal)
    assert "request r2" in refused.reason and "pod UID pod-0" in refused.reason, refused.reason
    two = prepare_claim(_reserved(claim(*shares[:2], uid="c1"), "a", "pod-1"), "c1", node)
    assert isinstance(two, PreparedClaim)
