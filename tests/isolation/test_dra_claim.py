"""A claim prepared by vgpu's DRA driver in mode vgpu-core is held to its share in the container.

The claim is prepared by the driver's own code (`vgpu.dra.prepare.prepare_claim`, with vgpu-core
installed as `vgpu dra-driver --mode vgpu-core` installs it) and its CDI device's container edits
are applied in the sandbox as a CDI-enabled runtime applies them: the `env` entries and the
`mounts` (`ro` or `rw`). Every container that uses the claim gets the same edits, so they share
the claim's memory as one container's processes share a device-plugin grant.
"""

from __future__ import annotations

from typing import Any

from tests.dra.test_prepare import claim, result
from tests.isolation.conftest import MIB, Cluster
from tests.isolation.sandbox import Container
from tests.isolation.test_memory_grant import codes
from vgpu.daemons.node_enforce import install_vgpu_core
from vgpu.dra.claim_dirs import claim_dirs
from vgpu.dra.prepare import NodeGpus, PreparedClaim, prepare_claim
from vgpu.node.grants import ContainerGrant, GrantMode, GrantSettings, Mount
from vgpu.node.model import GpuInfo


def cdi_container(spec: dict[str, Any]) -> Container:
    """The container edits of the claim's one CDI device, as the runtime applies them."""
    (device,) = spec["devices"]
    edits = device["containerEdits"]
    envs = dict(e.split("=", 1) for e in edits["env"])
    mounts = tuple(
        Mount(m["containerPath"], m["hostPath"], read_only="ro" in m["options"])
        for m in edits.get("mounts") or ()
    )
    return Container(ContainerGrant(envs=envs, mounts=mounts))


def prepared(cluster: Cluster, cores: str, memory: str) -> Container:
    """`vgpu dra-driver --mode vgpu-core`'s preparation of a claim for a share of GPU 0."""
    dirs = claim_dirs(cluster.state)
    core = install_vgpu_core(cluster.build.library, cluster.state, dirs)
    gpus = {i: GpuInfo(g.uuid, i, g.name, g.memory // MIB) for i, g in enumerate(cluster.node.gpus)}
    node = NodeGpus("n1", gpus, GrantSettings(GrantMode.VGPU_CORE, core=core))
    out = prepare_claim(claim(result("gpu-0", cores=cores, memory=memory)), "uid-1", node)
    assert isinstance(out, PreparedClaim), out
    return cdi_container(dict(out.cdi_spec))


def test_a_prepared_claim_is_held_to_its_memory_share(cluster: Cluster) -> None:
    container = prepared(cluster, "30", "1Gi")
    info = cluster.cuload(container, "info")
    fields = info.stdout.splitlines()[0].split()
    assert len(fields) > 2 and fields[2] == cluster.uuids[0], info.stdout + info.stderr
    values = dict(zip(fields[3::2], fields[4::2], strict=False))
    assert int(values["total"]) == int(values["info_total"]) == 1024 * MIB, info.stdout
    done = cluster.cuload(container, "alloc", "0", "mem", str(256 * MIB), "5")
    assert codes(done.stdout) == [0, 0, 0, 0, 2], done.stdout + done.stderr


def test_the_containers_of_one_claim_share_its_memory(cluster: Cluster) -> None:
    container = prepared(cluster, "30", "1Gi")
    holder = cluster.sandbox.popen(
        container, [str(cluster.build.cuload), "alloc", "0", "mem", str(768 * MIB), "1", "hold"]
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "rc 0"
        other = cluster.cuload(container, "alloc", "0", "mem", str(512 * MIB), "1")
        assert codes(other.stdout) == [2]  # 768 + 512 MiB > the claim's 1 GiB
    finally:
        holder.kill()
        holder.wait(10)
