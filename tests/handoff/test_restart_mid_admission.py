"""The node agent restarts between two containers of one pod's admission, after a regular init
container was allocated: what the state machine found once the kubelet model's pod-resources
`List` left regular init containers out, as the real kubelet's does
(pkg/kubelet/apis/podresources/server_v1.go `List`).

The restarted agent rebuilds its ledger from the pod watch and `List`, neither of which shows
that the init container was allocated; it then expects the init container's call next. The app
container's call (drawn from the kubelet's reuse pool: the init container's devices) is then
refused when its ask differs, or, worse, given the init container's grant when the asks are
equal and the memory differs. Both are pinned here, deterministic and small.
"""

from __future__ import annotations

import pytest

from tests.kubelet_model.pods import container, pod
from tests.kubelet_model.world import World

QUIET_LOGS = True
PENDING = (
    "the restarted agent cannot yet tell that the pod's regular init container was allocated "
    "(pod-resources List never shows it; the kubelet's device checkpoint would)"
)


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


@pytest.mark.xfail(strict=True, reason=PENDING)
def test_an_agent_restarted_after_an_init_container_admits_the_app_container() -> None:
    """Init asks 30 cores, main 25 on the same GPU: main's call matches nothing the restarted
    ledger expects and the pod was refused ('no pending container asks 25 cores there')."""
    world = _admit_with_restart_between(init=(30, 0), main=(25, 0))
    assert world.refusals == []
    assert world.tally["admitted"] == 1


@pytest.mark.xfail(strict=True, reason=PENDING)
def test_an_agent_restarted_after_an_init_container_never_gives_its_grant_to_the_app() -> None:
    """Init asks 25 cores + 4 memory blocks, main 25 cores: main's call looked like the init
    container's and main was granted the init container's memory limit."""
    world = _admit_with_restart_between(init=(25, 4), main=(25, 0))
    assert world.swaps == []
    assert world.tally["admitted"] == 1
