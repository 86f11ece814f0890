"""The per-container directories on disk, and the `limits` files the agent writes in them.

The rules (layout, ids, when a directory may go) are `vgpu.node.container_dirs`'s and the file
formats `vgpu.node.limits_file`'s; this module does the file work: create, list and remove the
directories, and write or read `limits`. `write_limits` replaces the file atomically (temporary
file in the same directory, then `rename`): the container has the directory mounted, so its
processes see either the old content or the new, never half of one. The agent mounts the state
dir at the same path as on the host, so the paths here are the host paths the runtime mounts.

With `mount_each` (`--container-dir-tmpfs`), every new directory is a tmpfs of its own sized for
its files (`vgpu.node.shared_bound.dir_tmpfs`), so one container that fills its directory takes
no room from another; a mount that fails refuses the container (fail closed), and a directory
is unmounted before it is removed.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import shutil
import stat
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from vgpu.adapters.dir_mounts import mount_tmpfs, unmount
from vgpu.adapters.shared_files import entries, remove, truncate
from vgpu.dra.claim_dirs import DRA_SUBDIR
from vgpu.node.container_dirs import (
    CONTAINERS,
    DEFAULT_GRACE_S,
    ID,
    OWNER_NAME,
    DirBounds,
    DirectoryLimit,
    DirOwner,
    over_bound,
)
from vgpu.node.limits_file import (
    LIMITS_NAME,
    MAX_LIMITS_BYTES,
    SHARED_FILES,
    DeviceLimit,
    LimitsError,
    parse_limits,
    render_limits,
)
from vgpu.node.shared_bound import MAX_OWNER_BYTES, DirTmpfs, trim

log = logging.getLogger(__name__)


class ContainerDirs:
    """Creates, lists and collects the per-container directories; the agent is their one owner.
    Thread-safe: Allocate creates on the kubelet's calls while the elastic duty collects."""

    def __init__(
        self,
        state_dir: Path,
        *,
        max_dirs: int | None = None,
        bounds: DirBounds | None = None,
        grace_s: float = DEFAULT_GRACE_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.root = state_dir / CONTAINERS
        bounds = bounds or DirBounds()
        self._bounds = bounds if max_dirs is None else replace(bounds, node=max_dirs)
        self._grace_s = grace_s
        self._clock = clock
        self._lock = threading.Lock()
        self._owners: dict[str, DirOwner | None] = {}  # read once per directory
        self._recorded: set[str] = set()  # named by the kubelet's checkpoint at some collect
        self._answered: dict[str, int] = {}  # the order of this process's answers, per directory
        self._answers = 0
        self._tmpfs: DirTmpfs | None = None

    def mount_each(self, tmpfs: DirTmpfs) -> None:
        """From now on, mount a tmpfs of `tmpfs`'s size over each new directory (at start)."""
        self._tmpfs = tmpfs

    @property
    def bounds(self) -> DirBounds:
        return self._bounds

    def limits_dir(self, cid: str) -> Path:
        return self.root / cid / "limits"

    def shared_dir(self, cid: str) -> Path:
        return self.root / cid / "shared"

    def create(self, devices: Sequence[DeviceLimit] | None, owner: DirOwner | None = None) -> str:
        """A directory for `owner`'s container (with its limits file, unless `devices` is None):
        its pod's shared init directory with these limits if there is one, else a new one."""
        with self._lock:
            owners = self._present_owners()
            if owner is not None and owner.shared_init and devices is not None:
                shared = self._shared_init(owners, owner, _grant_of(devices))
                if shared is not None:
                    self._answer(shared)
                    return shared
            problem = over_bound(owners.values(), owner, self._bounds)
            if problem is not None:
                raise DirectoryLimit(
                    f"{problem}; the kubelet's checkpoint still names them or they are younger "
                    "than the grace"
                )
            cid = secrets.token_hex(16)
            self._make(cid, devices, owner)
            self._owners[cid] = owner
            self._answer(cid)
            return cid

    def _answer(self, cid: str) -> None:
        self._answers += 1
        self._answered[cid] = self._answers

    def _make(
        self, cid: str, devices: Sequence[DeviceLimit] | None, owner: DirOwner | None
    ) -> None:
        self._mount(cid)
        try:
            self.limits_dir(cid).mkdir(parents=True, mode=0o755)
            shared = self.shared_dir(cid)
            shared.mkdir(mode=0o777)
            shared.chmod(0o777)  # the container's processes may run as any user; umask aside
            for name in SHARED_FILES:  # the library's files, mounted one by one (vgpucore)
                _empty_file(shared / name)
            if devices is not None:
                write_limits(self.limits_dir(cid), devices)
            if owner is not None:
                (self.root / cid / OWNER_NAME).write_text(owner.render(), encoding="ascii")
        except (OSError, LimitsError) as e:
            self._free(cid)
            raise DirectoryLimit(f"cannot prepare {self.root / cid}: {e}") from None

    def _mount(self, cid: str) -> None:
        """The directory itself and, with `mount_each`, its tmpfs; DirectoryLimit naming the
        cause and the option when the mount fails (the container is then refused)."""
        if self._tmpfs is None:
            return
        path = self.root / cid
        try:
            path.mkdir(parents=True, mode=0o755)
            mount_tmpfs(path, self._tmpfs)
        except OSError as e:
            shutil.rmtree(path, ignore_errors=True)
            raise DirectoryLimit(
                f"cannot mount a tmpfs of {self._tmpfs.size} bytes over {path}: "
                f"{e.strerror or e}; each container directory gets a tmpfs of its own "
                "(--container-dir-tmpfs, chart nodeAgent.containerDirs.perContainerTmpfs), "
                "which needs mount rights in the host's mount namespace (CAP_SYS_ADMIN, the "
                "state directory mounted with Bidirectional propagation)"
            ) from None

    def check_mount(self) -> str | None:
        """Whether a directory's tmpfs can be mounted (at start: without the rights every
        container would be refused); the problem, or None. Mounts over a probe directory that
        is no container's (`ids` skips its name) and frees it at once."""
        probe = ".mount-check"
        self._free(probe)  # what a start that stopped between the two steps left
        try:
            self._mount(probe)
        except DirectoryLimit as e:
            return f"{e}: every container is refused until it can"
        self._free(probe)
        return None

    def _free(self, cid: str) -> None:
        """Remove a directory, unmounting its tmpfs first (a mount point is never removed)."""
        path = self.root / cid
        if os.path.ismount(path):
            try:
                unmount(path)
            except OSError as e:
                log.warning("cannot unmount %s (its tmpfs stays): %s", path, e.strerror or e)
        shutil.rmtree(path, ignore_errors=True)

    def _present_owners(self) -> dict[str, DirOwner | None]:
        """Each present directory's owner (its `owner` file, read once; none: no owner)."""
        present = {}
        for cid in self.ids():
            if cid not in self._owners:
                try:
                    text = _read_bounded(self.root / cid / OWNER_NAME, MAX_OWNER_BYTES).decode(
                        "ascii"
                    )
                except (OSError, ValueError):
                    text = ""  # unreadable or oversized: no owner, only the node bound counts
                self._owners[cid] = DirOwner.parse(text)
            present[cid] = self._owners[cid]
        for gone in set(self._owners) - set(present):
            del self._owners[gone]
        return present

    def _shared_init(
        self, owners: dict[str, DirOwner | None], owner: DirOwner, grant: tuple[object, ...]
    ) -> str | None:
        """The directory of an init container of the same pod with the same limits, if any."""
        for cid, other in owners.items():
            if (
                other is not None
                and other.shared_init
                and (other.namespace, other.pod_uid) == (owner.namespace, owner.pod_uid)
            ):
                try:
                    same = _grant_of(read_limits(self.limits_dir(cid))) == grant
                except LimitsError:
                    same = False
                if same:
                    return cid
        return None

    def ids(self) -> Iterator[str]:
        """Ids of the directories present (anything else under the root is left alone)."""
        try:
            entries = list(os.scandir(self.root))
        except FileNotFoundError:
            return
        for entry in entries:
            if ID.fullmatch(entry.name) and entry.is_dir(follow_symlinks=False):
                yield entry.name

    def collect(self, referenced: frozenset[str]) -> list[str]:
        """Remove the directories `referenced` does not name: at once when an earlier collect saw
        them named (the kubelet dropped them) or when it names a directory answered after them
        (the kubelet never took them in, or dropped them before a collect saw them), else once
        older than the grace.

        The kubelet admits pods one at a time and takes each Allocate answer into its devices
        before it asks the next one (pkg/kubelet/cm/devicemanager/manager.go,
        `allocateContainerResources`: the answer is inserted, then `writeCheckpoint`): a
        checkpoint naming a later answer holds every earlier one still in use. Without that,
        a pod created and deleted between two collects left its directory for the whole grace."""
        removed = []
        with self._lock:
            now = self._clock()
            present = set(self.ids())
            self._recorded &= present
            self._answered = {c: n for c, n in self._answered.items() if c in present}
            latest = max((self._answered.get(c, 0) for c in referenced), default=0)
            for cid in present:
                if cid in referenced:
                    self._recorded.add(cid)
                    continue
                try:
                    age = now - (self.root / cid).stat().st_mtime
                except FileNotFoundError:
                    continue
                passed = 0 < self._answered.get(cid, latest) < latest
                if cid in self._recorded or passed or age > self._grace_s:
                    self._free(cid)
                    self._recorded.discard(cid)
                    self._owners.pop(cid, None)
                    self._answered.pop(cid, None)
                    removed.append(cid)
        if removed:
            log.info("removed %d container directories the kubelet no longer holds", len(removed))
        return removed

    def trim_shared(
        self, files: Mapping[str, int], only: Collection[str] | None = None
    ) -> list[str]:
        """Cut every shared directory (or those of the ids in `only`) back to `files` and the
        bounds (`vgpu.node.shared_bound`); a line per directory cut, naming it, its owner, why
        and what could not be cut."""
        said = []
        with self._lock:
            owners = self._present_owners()
        for cid, owner in owners.items():
            if only is not None and cid not in only:
                continue
            shared = self.shared_dir(cid)
            cut = trim(entries(shared), files)
            if cut.problem is None:
                continue
            failed = [truncate(shared / name, size) for name, size in cut.truncate]
            failed += [remove(shared / name) for name in cut.remove]
            whose = (
                f" ({owner.namespace}, pod UID {owner.pod_uid}, {owner.container})" if owner else ""
            )
            left = "; ".join(f for f in failed if f)
            done = f"NOT cut back: {left}" if left else "cut back"
            said.append(f"{shared}{whose}: {cut.problem}; {done}")
        return said


def _read_bounded(path: Path, limit: int) -> bytes:
    """A regular file of at most `limit` bytes; ValueError when larger or not a
    regular file, OSError when it cannot be read. Never follows a link, never blocks."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError(f"{path} is not a regular file")
        data = os.read(fd, limit + 1)
    finally:
        os.close(fd)
    if len(data) > limit:
        raise ValueError(f"{path} is larger than {limit} bytes")
    return data


def claim_dirs(state_dir: Path, bounds: DirBounds | None = None) -> ContainerDirs:
    """The DRA driver's directories: `<state dir>/dra/containers/`, collected without a grace
    (the kubelet tells a DRA driver when a claim is done), bounded as the node agent's
    (`vgpu.dra.claim_dirs`)."""
    return ContainerDirs(state_dir / DRA_SUBDIR, grace_s=0.0, bounds=bounds)


def _grant_of(devices: Sequence[DeviceLimit]) -> tuple[object, ...]:
    """The limits without the allowance, which the elastic duty moves."""
    return tuple((d.uuid, d.memory, d.cores, d.limit) for d in devices)


def _empty_file(path: Path) -> None:
    """An empty file any user may read and write (the library sizes and fills it)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666)
    try:
        os.fchmod(fd, 0o666)  # umask aside
    finally:
        os.close(fd)


def write_limits(directory: Path, devices: Sequence[DeviceLimit]) -> None:
    """Replace `directory/limits` atomically (the agent is its one writer)."""
    text = render_limits(devices)
    tmp = directory / f".{LIMITS_NAME}.tmp"
    try:
        with tmp.open("w", encoding="ascii") as f:
            f.write(text)  # no fsync: visibility is what matters; a host crash ends the container
        tmp.chmod(0o444)
        os.replace(tmp, directory / LIMITS_NAME)
    except OSError:
        with contextlib.suppress(OSError):  # a partial copy (ENOSPC) would hold a page
            tmp.unlink()
        raise


def read_limits(directory: Path) -> tuple[DeviceLimit, ...]:
    """The devices of `directory/limits`; raises LimitsError (also for an unreadable file)."""
    try:
        text = _read_bounded(directory / LIMITS_NAME, MAX_LIMITS_BYTES)
    except OSError as e:
        raise LimitsError(f"limits in {directory}: {e.strerror or e}") from None
    except ValueError as e:  # larger than any limits file the agent writes, or not a file
        raise LimitsError(f"limits in {directory}: {e}") from None
    return parse_limits(text.decode("ascii", "replace"))
