"""The node agent restarts between two containers of one pod's admission, after a regular init
container was allocated: what the state machine found once the kubelet model's pod-resources
`List` left regular init containers out, as the real kubelet's does
(pkg/kubelet/apis/podresources/server_v1.go `List`).

The restarted agent rebuilds its ledger from the pod watch and `List`, neither of which shows
that the init container was allocated; it then expects the init container's call next. The app
container's call (drawn from the kubelet's reuse pool: the init container's devices) is then
refused when its ask differs, or, worse, given the init container's grant when the asks are
equal and the memory differs. The kubelet writes its device checkpoint after each container's
allocation, naming regular init containers too; the restarted agent admits them from it
(`vgpu/node/handoff/reconcile.py`). Both cases are pinned here, deterministic and small.
"""

from __future__ import annotations

from tests.handoff.pods import agent, ids
from tests.handoff.pods import pod as bound_pod
from tests.kubelet_model.pods import container, pod
from tests.kubelet_model.world import World
from vgpu.core.ids import PodKey
from vgpu.node.devices import UnitKind
from vgpu.node.grants import Refusal
from vgpu.node.handoff.admissions import HeldDevices

CORES = "vgpu.io/cores"

QUIET_LOGS = True


def _admit_with_restart_between(init: tuple[int, int], main: tuple[int, int]) -> World:
    """One node, one GPU: the pod is bound, then its kubelet admits it and the agent restarts
    between the init container's allocation and the app container's."""
    world = World(nodes=1, gpus=1, seed=0)
    node = next(iter(world.nodes.values()))
    node.kubelet.between = lambda: world.restart_agent(node)
    raw = pod("p", [container("main", *main)], init=[container("init", *init)])
    key = world.submit(raw)
    assert world.schedule(key)
    world.admit_next(node)
    return world


def test_an_agent_restarted_after_an_init_container_admits_the_app_container() -> None:
    """Init asks 30 cores, main 25 on the same GPU: main's call matches nothing the restarted
    ledger expects and the pod was refused ('no pending container asks 25 cores there')."""
    world = _admit_with_restart_between(init=(30, 0), main=(25, 0))
    assert world.refusals == []
    assert world.tally["admitted"] == 1


def test_an_agent_restarted_after_an_init_container_never_gives_its_grant_to_the_app() -> None:
    """Init asks 25 cores + 4 memory blocks, main 25 cores: main's call looked like the init
    container's and main was granted the init container's memory limit."""
    world = _admit_with_restart_between(init=(25, 4), main=(25, 0))
    assert world.swaps == []
    assert world.tally["admitted"] == 1


def test_the_checkpoint_admits_regular_init_containers_only() -> None:
    """A restarted ledger, part-way through the pod's admission: the checkpoint's regular init
    container is admitted, so the app container's call (the init container's devices, reused)
    gets the app container's own grant; a sidecar or app container the checkpoint names but
    the List does not is left to the List."""
    raw = bound_pod(
        "p",
        [("main", 25, 0, "G0")],
        [("init", 25, 2, "G0"), ("side", 10, 0, "G0")],
        sidecars=frozenset({"side"}),
    )
    handoff, policy, _ = agent(raw)
    cores = ids("G0", "c", 25)
    key = PodKey("ns/p")
    checkpoint = [
        HeldDevices(key, "init", UnitKind.CORES, tuple(cores)),
        HeldDevices(key, "init", UnitKind.MEMORY, tuple(ids("G0", "m", 2))),
        HeldDevices(key, "side", UnitKind.CORES, tuple(ids("G0", "c", 10, 25))),
    ]
    handoff.reconcile([], checkpoint)
    assert [c.container.name for c in handoff.candidates(UnitKind.CORES, 10)] == ["side"]
    assert not isinstance(policy.allocate(CORES, [ids("G0", "c", 10, 25)]), Refusal)
    result = policy.allocate(CORES, [cores])
    assert not isinstance(result, Refusal), result
    (grant,) = result
    assert grant.envs["VGPU_MEMORY_LIMIT_MIB"] == str(16384 * 25 // 100), "main got init's grant"
