"""A container for the isolation tests: bubblewrap applying the node agent's real Allocate answer.

`grant_for` asks the agent's own code (`vgpu.node.grants.container_grant` in mode vgpu-core, with
the library installed by `vgpu.adapters.vgpu_core_install.install_vgpu_core`) for a container's answer:
its environment and its mounts (library, preload file, limits and shared directories). `Sandbox`
runs a command under that answer as a container runtime would: a read-only root, a private
`/tmp`, only the answer's mounts and variables, and the stand-in driver libraries found by name
through the sandbox's own `/etc/ld.so.cache` (so `env -i` programs find them too).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tests.isolation.standins import CONFIG_PATH, Node
from vgpu.adapters.container_dirs import ContainerDirs
from vgpu.adapters.vgpu_core_install import install_vgpu_core
from vgpu.node.grants import ContainerGrant, GpuLimit, GrantMode, GrantSettings, container_grant
from vgpu.node.vgpucore import LIMITS_IN_CONTAINER, STATE_IN_CONTAINER

_GRAFTED = ("/etc", "/usr/local")  # host directories rebuilt so the answer can mount inside them
_SKIPPED = {"proc", "dev", "tmp", "run", "etc", "sys", "old_root", "lost+found"}


@dataclass(frozen=True)
class Container:
    """One container's Allocate answer and where its directories are on the host."""

    grant: ContainerGrant

    def host_dir(self, container_path: str) -> Path:
        return Path(
            next(m.host_path for m in self.grant.mounts if m.container_path == container_path)
        )

    @property
    def limits_dir(self) -> Path:
        return self.host_dir(LIMITS_IN_CONTAINER)

    @property
    def shared_dir(self) -> Path:
        return self.host_dir(STATE_IN_CONTAINER).parent

    def write_limits(self, text: str) -> None:
        """Replace `limits` as the agent does: a temporary file, then rename."""
        tmp = self.limits_dir / ".limits.tmp"
        tmp.write_text(text)
        os.replace(tmp, self.limits_dir / "limits")


def grant_for(
    library: Path, state_dir: Path, gpus: Sequence[GpuLimit], cores_limit: int | None = None
) -> Container:
    """The agent's answer for a container holding `gpus` (mode vgpu-core)."""
    core = install_vgpu_core(library, state_dir, ContainerDirs(state_dir))
    settings = GrantSettings(mode=GrantMode.VGPU_CORE, core=core)
    grant = container_grant(gpus, settings, cores_limit=cores_limit)
    assert isinstance(grant, ContainerGrant), grant
    return Container(grant)


@dataclass
class Sandbox:
    """Runs commands as processes of a container on the simulated node."""

    node: Node
    ld_cache: Path  # lists the stand-ins' directory besides the system's libraries
    visible: tuple[Path, ...] = ()  # host paths the commands need (programs), read-only
    preload_first: str | None = None  # a runtime that must load first (the ASan runtime)
    env_base: dict[str, str] = field(default_factory=lambda: {"PATH": "/usr/bin:/bin"})

    def _graft(self, host: str, files: Mapping[str, tuple[str, bool]]) -> list[str]:
        """Rebuild `host` in a tmpfs from its entries, plus `files` (path -> (source, read-only))."""
        args = ["--tmpfs", host]
        for entry in sorted(os.scandir(host), key=lambda e: e.name):
            if entry.path in files or any(f.startswith(entry.path + "/") for f in files):
                continue
            if entry.is_symlink():
                args += ["--symlink", os.readlink(entry.path), entry.path]
            else:
                args += ["--ro-bind", entry.path, entry.path]
        for path, (source, read_only) in sorted(files.items()):
            args += ["--ro-bind" if read_only else "--bind", source, path]
        return [*args, "--remount-ro", host]

    def argv(
        self,
        container: Container,
        command: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        writable_tmp: bool = True,
    ) -> list[str]:
        """The bwrap command line running `command` in `container`."""
        files: dict[str, tuple[str, bool]] = {
            "/etc/ld.so.cache": (str(self.ld_cache), True),
            str(CONFIG_PATH): (str(self.node.config), True),
        }
        run: list[str] = []
        for m in container.grant.mounts:
            if m.container_path.startswith("/run/"):
                run += ["--ro-bind" if m.read_only else "--bind", m.host_path, m.container_path]
            else:
                files[m.container_path] = (m.host_path, m.read_only)
        if self.preload_first:
            preload = self.node.dir / "ld.so.preload.sanitized"
            library = Path(files["/etc/ld.so.preload"][0]).read_text()
            preload.write_text(f"{self.preload_first}\n{library}")
            files["/etc/ld.so.preload"] = (str(preload), True)
        args = ["bwrap", "--die-with-parent", "--proc", "/proc", "--dev", "/dev"]
        for entry in sorted(os.scandir("/"), key=lambda e: e.name):
            if entry.name in _SKIPPED:
                continue
            if entry.is_symlink():
                args += ["--symlink", os.readlink(entry.path), entry.path]
            elif entry.is_dir():
                args += ["--ro-bind", entry.path, entry.path]
        args += ["--ro-bind", "/sys", "/sys"]
        for host in _GRAFTED:
            mine = {p: f for p, f in files.items() if p.startswith(host + "/")}
            args += self._graft(host, mine)
        args += ["--tmpfs", "/tmp"]
        for path in (self.node.built.dir, *self.visible):
            args += ["--ro-bind", str(path), str(path)]
        args += ["--bind", str(self.node.dir), str(self.node.dir)]  # the simulated node's state
        if not writable_tmp:
            args += ["--remount-ro", "/tmp"]
        args += ["--tmpfs", "/run", *run, "--remount-ro", "/run", "--remount-ro", "/"]
        variables = {**self.env_base, **container.grant.envs, **(env or {})}
        if self.preload_first and variables.get("LD_PRELOAD"):
            variables["LD_PRELOAD"] = f"{self.preload_first}:{variables['LD_PRELOAD']}"
        args += ["--clearenv"]
        for key, value in sorted(variables.items()):
            args += ["--setenv", key, value]
        return [*args, "--", *command]

    def run(
        self, container: Container, command: Sequence[str], *, timeout: float = 60, **kw: object
    ) -> subprocess.CompletedProcess[str]:
        argv = self.argv(container, command, **kw)  # type: ignore[arg-type]
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)

    def popen(
        self, container: Container, command: Sequence[str], **kw: object
    ) -> subprocess.Popen[str]:
        argv = self.argv(container, command, **kw)  # type: ignore[arg-type]
        return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
