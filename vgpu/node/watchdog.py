"""The usage watchdog's decisions: who uses how much GPU memory, against what they were granted.

Inputs are plain values: per-process usage samples from the GPU backend, each process's owner
(a `ContainerKey` or why it has none, `vgpu.node.containers`), and the grants of the containers
assigned to this node (`grants_of`, from the hand-off ledger). `assess` returns an `Assessment`:

- per (container, GPU): memory granted and used, which the metrics endpoint exports;
- `OverGrant` findings: a container whose processes together use more memory on a GPU than it
  was granted there (a container with no grant on that GPU was granted 0), plus a tolerance;
  with `kill` set, the processes to stop, largest first, until the rest fit the grant;
- `UnknownProcess` findings: a process using GPU memory outside any pod this node knows, which
  the scheduler cannot see.

Processes that ended before their cgroup was read, or whose container the pod status does not
list yet, are left out of this round. Samples whose usage the driver can't tell count as 0.
`Throttle` keeps repeated findings from turning into an Event per loop. Pure: no I/O, injected
clock.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field

from vgpu.core.units import MMIB_PER_MIB
from vgpu.node.containers import ContainerKey, Unresolved
from vgpu.node.handoff.admissions import GrantedContainer
from vgpu.node.model import ProcessUsage

MIB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class Grant:
    """What one container was granted on one GPU."""

    cores: int
    memory_bytes: int


Grants = Mapping[ContainerKey, Mapping[str, Grant]]


def grants_of(granted: Iterable[GrantedContainer]) -> dict[ContainerKey, dict[str, Grant]]:
    """Per container and GPU, its grant; memory in whole MiB as the container's limit says."""
    out: dict[ContainerKey, dict[str, Grant]] = {}
    for g in granted:
        namespace, pod = g.pod.split("/", 1)
        key = ContainerKey(namespace, pod, g.container, g.uid)
        per_gpu = out.setdefault(key, {})
        for share in g.shares:
            mib = -(-share.memory_mmib // MMIB_PER_MIB)
            per_gpu[share.uuid] = Grant(share.cores, mib * MIB)
    return out


@dataclass(frozen=True, slots=True)
class WatchdogPolicy:
    kill: bool = False
    tolerance_bytes: int = 0

    def __post_init__(self) -> None:
        if self.tolerance_bytes < 0:
            raise ValueError(f"tolerance_bytes: must be >= 0, got {self.tolerance_bytes}")


@dataclass(frozen=True, slots=True)
class ContainerUsage:
    """One container on one GPU: granted (None: no grant there) and used memory, its PIDs."""

    key: ContainerKey
    gpu_uuid: str
    granted_bytes: int | None
    used_bytes: int
    pids: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class OverGrant:
    key: ContainerKey
    gpu_uuid: str
    used_bytes: int
    granted_bytes: int
    pids: tuple[int, ...]
    kill: tuple[int, ...] = ()

    @property
    def excess_bytes(self) -> int:
        return self.used_bytes - self.granted_bytes


@dataclass(frozen=True, slots=True)
class UnknownProcess:
    gpu_uuid: str
    pid: int
    used_bytes: int


@dataclass(frozen=True, slots=True)
class Assessment:
    containers: tuple[ContainerUsage, ...] = ()
    over: tuple[OverGrant, ...] = ()
    unknown: tuple[UnknownProcess, ...] = ()

    @property
    def kills(self) -> tuple[tuple[OverGrant, int], ...]:
        return tuple((finding, pid) for finding in self.over for pid in finding.kill)


Owner = ContainerKey | Unresolved


def assess(
    samples: Iterable[ProcessUsage],
    owners: Mapping[int, Owner],
    grants: Grants,
    policy: WatchdogPolicy | None = None,
) -> Assessment:
    """Join usage samples with their owners and grants; see the module docstring."""
    policy = policy or WatchdogPolicy()
    used: dict[tuple[ContainerKey, str], dict[int, int]] = {}
    unknown: list[UnknownProcess] = []
    for sample in samples:
        owner = owners.get(sample.pid, Unresolved.FOREIGN)
        amount = sample.used_bytes or 0
        if isinstance(owner, ContainerKey):
            procs = used.setdefault((owner, sample.gpu_uuid), {})
            procs[sample.pid] = procs.get(sample.pid, 0) + amount
        elif owner is Unresolved.FOREIGN:
            unknown.append(UnknownProcess(sample.gpu_uuid, sample.pid, amount))
    rows = {(key, gpu): None for key, per_gpu in grants.items() for gpu in per_gpu}
    rows.update(dict.fromkeys(used))
    containers, over = [], []
    for key, gpu in sorted(rows):
        grant = grants.get(key, {}).get(gpu)
        procs = used.get((key, gpu), {})
        usage = ContainerUsage(
            key,
            gpu,
            None if grant is None else grant.memory_bytes,
            sum(procs.values()),
            tuple(sorted(procs)),
        )
        containers.append(usage)
        finding = _over_grant(usage, procs, policy)
        if finding is not None:
            over.append(finding)
    unknown.sort(key=lambda u: (u.gpu_uuid, u.pid))
    return Assessment(tuple(containers), tuple(over), tuple(unknown))


def _over_grant(
    usage: ContainerUsage, procs: Mapping[int, int], policy: WatchdogPolicy
) -> OverGrant | None:
    granted = usage.granted_bytes or 0
    limit = granted + policy.tolerance_bytes
    if usage.used_bytes <= limit:
        return None
    kill: list[int] = []
    if policy.kill:
        remaining = usage.used_bytes
        for pid, amount in sorted(procs.items(), key=lambda p: (-p[1], p[0])):
            if remaining <= limit:
                break
            kill.append(pid)
            remaining -= amount
    return OverGrant(usage.key, usage.gpu_uuid, usage.used_bytes, granted, usage.pids, tuple(kill))


@dataclass(slots=True)
class Throttle:
    """Lets a finding through once per `interval_s` per key."""

    interval_s: float
    clock: Callable[[], float]
    _last: dict[Hashable, float] = field(default_factory=dict)

    def allow(self, key: Hashable) -> bool:
        now = self.clock()
        self._last = {k: t for k, t in self._last.items() if now - t < self.interval_s}
        if key in self._last:
            return False
        self._last[key] = now
        return True


def gib(n: int) -> str:
    """Bytes as a short human figure for messages: `3.0 GiB`, `512 MiB`."""
    return f"{n / (1024 * MIB):.1f} GiB" if n >= 1024 * MIB else f"{n // MIB} MiB"
