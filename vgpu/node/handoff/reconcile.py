"""Reconciliation of the node's hand-off ledger with the kubelet's pod-resources record.

The kubelet's `List` is the truth about which container holds which device IDs; the ledger's
own admissions are only what Allocate guessed. Kept apart from `Handoff` because it is the one
place where the ledger is rewritten from outside: admissions the kubelet does not show are
dropped once older than the grace period (Allocate has returned, the kubelet not yet recorded),
attributions another holder's record contradicts are dropped at once, and what each container
holds is checked against its assignment.

Init containers are the exception the List cannot cover: it reports a pod's app containers (and,
with sidecars, restartable init containers) only (pkg/kubelet/apis/podresources/server_v1.go),
so a regular init container would be dropped after the grace period and counted pending for
the pod's whole life. The kubelet allocates every container of a pod when it admits the pod,
init containers first, and the first failure fails the pod
(pkg/kubelet/cm/topologymanager/scope_container.go, `Admit`): an app container holding devices,
or any container that has run, proves every init container allocated. Such a pod's init
containers are admitted whole. The kubelet's device checkpoint would say the same per
container, but it may be unreadable (the List-only fallback) and is keyed by the kubelet's UID,
so the rule rests on the List and the pod's status, which every agent reads. Part-way through
a pod's admission neither shows anything yet: an agent restarted between a regular init
container's allocation and the next container's would expect the init container's call again,
and take the next container's call for it (another grant) or refuse it. The kubelet writes its
checkpoint after each container's allocation (manager.go `allocateContainerResources` ends with
`writeCheckpoint`), so the caller passes the checkpoint's entries (`checkpointed`) where it can
read them, and the regular init containers they name are admitted.
"""

from __future__ import annotations

from collections.abc import Iterable

from vgpu.core.ids import PodKey
from vgpu.core.kubelet_reuse import Role
from vgpu.node.handoff.entries import KINDS, HeldDevices, PodEntry

Owners = dict[str, tuple[PodKey, str]]
"""Device ID -> (pod, container) holding it, as the kubelet records."""


def reconcile_entries(
    pods: dict[PodKey, PodEntry],
    held: Iterable[HeldDevices],
    now: float,
    grace_s: float,
    checkpointed: Iterable[HeldDevices] = (),
) -> tuple[list[tuple[PodKey, str]], tuple[HeldDevices, ...]]:
    """Rewrite each entry's admissions from `held` (the List) and the regular init containers
    of `checkpointed` (the kubelet's checkpoint, module doc); (reports, holdings of unassigned
    pods).

    Reports are (pod, message) for containers holding IDs that differ from their assignment and
    for unassigned pods holding devices. The caller holds the ledger's lock.
    """
    inits: dict[PodKey, list[HeldDevices]] = {}
    for h in checkpointed:
        inits.setdefault(h.pod, []).append(h)
    by_pod: dict[PodKey, list[HeldDevices]] = {}
    owner: Owners = {}
    for h in held:
        by_pod.setdefault(h.pod, []).append(h)
        owner.update(dict.fromkeys(h.ids, (h.pod, h.container)))
    reports: list[tuple[PodKey, str]] = []
    unassigned: list[HeldDevices] = []
    for key, entry in pods.items():
        holdings = by_pod.pop(key, [])
        if entry.assignment is None:
            unassigned += holdings
            if holdings:
                reports.append((key, f"unassigned pod holds vGPU devices: {entry.problem}"))
            continue
        _keep_fresh(entry, key, owner, now, grace_s)
        holdings += [h for h in inits.get(key, ()) if _is_regular_init(entry, h.container)]
        for h in holdings:
            problem = mismatch(entry, h)
            if problem:
                reports.append((key, problem))
            old = entry.admitted.get((h.container, h.kind))
            entry.admitted[(h.container, h.kind)] = (h.ids, old[1] if old else now)
            entry.unsure.discard((h.container, h.kind))  # the kubelet says so
        if entry.info.started or any(_is_app(entry, h.container) for h in holdings):
            _admit_init_containers(entry, now)
        entry.unsure &= set(entry.admitted)
    for rest in by_pod.values():
        unassigned += rest
    return reports, tuple(unassigned)


def _keep_fresh(entry: PodEntry, key: PodKey, owner: Owners, now: float, grace_s: float) -> None:
    """Keep only admissions younger than the grace period that no other holder claims.

    Interchangeable pending containers (same ask, GPU and grant) may be attributed to either pod
    at Allocate; when the kubelet's record names another holder for these IDs, it is the truth
    and this attribution is dropped (that container is pending).
    """

    def fresh_and_unclaimed(container: str, ids: tuple[str, ...], at: float) -> bool:
        claimed = {owner.get(i, (key, container)) for i in ids}
        return now - at < grace_s and claimed <= {(key, container)}

    entry.admitted = {
        k: v for k, v in entry.admitted.items() if fresh_and_unclaimed(k[0], tuple(v[0]), v[1])
    }


def _is_app(entry: PodEntry, name: str) -> bool:
    container = entry.info.container(name)
    return container is not None and not container.init


def _is_regular_init(entry: PodEntry, name: str) -> bool:
    """A regular (not restartable) init container: the List never shows it."""
    container = entry.info.container(name)
    return container is not None and container.role is Role.INIT


def _admit_init_containers(entry: PodEntry, now: float) -> None:
    """The pod is past its admission (module doc): its init containers hold their devices."""
    for container in entry.info.containers:
        if not container.init or not entry.shares.get(container.name):
            continue
        for kind in KINDS:
            if entry.ask(container, kind) > 0:
                ids, _ = entry.admitted.get((container.name, kind), ((), now))
                entry.admitted[(container.name, kind)] = (ids, now)
                entry.unsure.discard((container.name, kind))


def mismatch(entry: PodEntry, h: HeldDevices) -> str | None:
    """Why what `h` holds differs from the container's assignment (None: it does not)."""
    shares = entry.shares.get(h.container, ())
    container = entry.info.container(h.container)
    want = {s.uuid for s in shares}
    have = {i.split("::", 1)[0] for i in h.ids}
    size = entry.ask(container, h.kind) if container else 0
    if have == want and len(h.ids) == size:
        return None
    return (
        f"container {h.container} holds {len(h.ids)} {h.kind.name.lower()} devices on "
        f"{', '.join(sorted(have)) or 'no GPU'}; its assignment says {size} on "
        f"{', '.join(sorted(want)) or 'no GPU'}"
    )
