"""Stand-in `libcuda.so.1` and `libnvidia-ml.so.1`: build them, describe a simulated node.

The C sources in `standin/` simulate a node of GPUs from NVIDIA's public CUDA Driver API and
NVML references (a memory pool per GPU shared by all processes, kernels that keep a GPU's one
timeline busy for a simulated time, per-process busy time, XID events), so the interposer and
the node agent's NVML path can be tested on machines without a GPU. `build` compiles both
libraries, the `cuprobe` test program and the `vgpu-standin-ctl` tool in about a second;
`write_config` writes the node description they read (from `CONFIG_PATH`, or from
`$VGPU_STANDIN_CONFIG` outside a sandbox).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

SOURCES = Path(__file__).parent / "standin"
CONFIG_PATH = Path("/etc/vgpu-standin/gpus")  # where the libraries look without the env var
CONFIG_ENV = "VGPU_STANDIN_CONFIG"
CONTEXT_BYTES = 64 << 20  # device memory a CUDA context takes (the `context` config line)
GIB = 1 << 30

_COMMON = ("config.c", "node.c", "pool.c", "pins.c", "timeline.c", "dmem.c")
_CUDA = (
    "cuda_core.c",
    "cuda_mem.c",
    "cuda_exec.c",
    "cuda_graph.c",
    "cuda_proc.c",
    "cuda_vmm.c",
    "cuda_ipc.c",
    "cuda_pool.c",
    "cuda_capture.c",
    "cuda_work.c",
    "cuda_stack.c",
    "cuda_limit.c",
)
_NVML = ("nvml_device.c", "nvml_usage.c", "nvml_limits.c")
_CFLAGS = ("-O1", "-g", "-fPIC", "-fvisibility=hidden", "-Wall", "-Wextra", "-Werror")
_SANITIZE = ("-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-fno-sanitize-recover")


@dataclass(frozen=True)
class Standins:
    """Where one build put its outputs (the libraries carry their sonames as file names)."""

    dir: Path
    sanitized: bool
    omitted: tuple[str, ...]

    @property
    def libcuda(self) -> Path:
        return self.dir / "libcuda.so.1"

    @property
    def libnvml(self) -> Path:
        return self.dir / "libnvidia-ml.so.1"

    @property
    def cuprobe(self) -> Path:
        return self.dir / "cuprobe"

    @property
    def ctl(self) -> Path:
        return self.dir / "vgpu-standin-ctl"


@dataclass(frozen=True)
class StandinGpu:
    """One simulated GPU (a line of the config)."""

    uuid: str
    memory: int = 16 * GIB
    pci: str = "00000000:3B:00.0"
    numa: int = 0
    mig: str = "off"  # on, off, or none (not MIG-capable)
    peers: tuple[str, ...] = ()
    sms: int = 40
    cc: str = "7.5"
    name: str = "Tesla T4"

    def line(self) -> str:
        peers = ",".join(self.peers) or "-"
        fields = (self.uuid, self.memory, self.pci, self.numa, self.mig, peers, self.sms, self.cc)
        return "gpu " + " ".join(str(f) for f in fields) + " " + self.name


def gpu_uuid(seed: str, index: int) -> str:
    """A stable `GPU-` UUID for tests (NVML's form: 8-4-4-4-12 hex digits)."""
    h = hashlib.sha256(f"{seed}/{index}".encode()).hexdigest()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def node_gpus(count: int = 2, *, seed: str = "standin", memory: int = 16 * GIB) -> list[StandinGpu]:
    """`count` T4-like GPUs on distinct PCI buses, alternating NUMA nodes, no NVLink."""
    return [
        StandinGpu(gpu_uuid(seed, i), memory, f"00000000:{0x3B + i:02X}:00.0", numa=i % 2)
        for i in range(count)
    ]


def write_config(
    path: Path,
    gpus: Sequence[StandinGpu],
    *,
    state: Path,
    driver: str = "550.54.15",
    cuda_version: int = 12040,
    context_bytes: int = CONTEXT_BYTES,
    cgroupfs: Path | None = None,
) -> Path:
    """Write the node description; `state` is the file all processes share (one device).

    `cgroupfs`: where the simulated driver reads cgroup v2 for its per-cgroup memory limits
    (a fake one in a test directory); without it the driver has none."""
    lines = [
        f"state {state}",
        f"driver {driver} {cuda_version}",
        f"context {context_bytes}",
        *([f"cgroupfs {cgroupfs}"] if cgroupfs else []),
        *(g.line() for g in gpus),
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


def _compile(args: Sequence[str]) -> None:
    done = subprocess.run(["gcc", *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"stand-in build failed: gcc {' '.join(args)}\n{done.stderr}")


def _library_args(
    out: Path, soname: str, sources: Sequence[str], flags: Sequence[str], omit: Sequence[str]
) -> list[str]:
    args = [*flags, "-shared", f"-Wl,-soname,{soname}", "-Wl,-Bsymbolic", "-Wl,--no-undefined"]
    if omit:  # hide the symbols from the loader and from cuGetProcAddress's table
        script = out / f"{soname}.map"
        script.write_text("{ global: *; local: " + " ".join(f"{s};" for s in omit) + " };\n")
        args += [f"-Wl,--version-script={script}", f'-DSI_OMIT="{" ".join(omit)}"']
    paths = [str(SOURCES / s) for s in (*_COMMON, *sources)]
    return [*args, "-o", str(out / soname), *paths, "-lpthread"]


def build(out: Path, *, sanitize: bool = False, omit: Sequence[str] = ()) -> Standins:
    """Compile the stand-ins into `out` (optionally with ASan+UBSan, or lacking `omit`).

    A sanitized build needs a sanitized program to load it (the sanitizer runtime must come
    first), so drive it with `cuprobe` from the same build, not with ctypes from Python."""
    out.mkdir(parents=True, exist_ok=True)
    flags = [*_CFLAGS, *(_SANITIZE if sanitize else ())]
    jobs = [
        _library_args(out, "libcuda.so.1", _CUDA, flags, omit),
        _library_args(out, "libnvidia-ml.so.1", _NVML, flags, omit),
        [
            *flags,
            "-o",
            str(out / "vgpu-standin-ctl"),
            *(str(SOURCES / s) for s in _COMMON),
            str(SOURCES / "ctl.c"),
            "-lpthread",
        ],
    ]
    with ThreadPoolExecutor(len(jobs)) as pool:
        list(pool.map(_compile, jobs))
    if not omit:  # cuprobe links every function it may call, so only against a full build
        # It finds libcuda.so.1 by name at run time (an interposer or sandbox may swap it).
        probe = [str(SOURCES / "cuprobe.c"), f"-L{out}", "-l:libcuda.so.1"]
        _compile([*flags, "-o", str(out / "cuprobe"), *probe])
    return Standins(out, sanitize, tuple(omit))


_BUILDS: dict[tuple[Path, bool, tuple[str, ...]], Standins] = {}


def cached_build(root: Path, *, sanitize: bool = False, omit: Sequence[str] = ()) -> Standins:
    """`build` once per (root, variant) in this process: for session-scoped fixtures."""
    key = (root, sanitize, tuple(omit))
    if key not in _BUILDS:
        name = "standin" + ("-san" if sanitize else "") + "".join(f"-{s}" for s in omit)
        _BUILDS[key] = build(root / name, sanitize=sanitize, omit=omit)
    return _BUILDS[key]


def gcc_available() -> bool:
    return shutil.which("gcc") is not None


@dataclass
class Node:
    """A simulated node for one test: config and state file in a private directory."""

    built: Standins
    gpus: list[StandinGpu]
    dir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="vgsn")))
    cgroupfs: Path | None = None

    def __post_init__(self) -> None:
        self.config = write_config(
            self.dir / "gpus", self.gpus, state=self.dir / "state", cgroupfs=self.cgroupfs
        )

    def env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """Environment for a program using the stand-ins outside a sandbox."""
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), CONFIG_ENV: str(self.config)}
        env["LD_LIBRARY_PATH"] = str(self.built.dir)
        if self.built.sanitized:
            env["ASAN_OPTIONS"] = "detect_leaks=0"
        return {**env, **(extra or {})}

    def ctl(self, *args: str) -> str:
        done = subprocess.run(
            [str(self.built.ctl), *args],
            env=self.env(),
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        )
        return done.stdout

    def inject_xid(self, uuid: str, xid: int) -> None:
        self.ctl("xid", uuid, str(xid))

    def usage(self) -> Usage:
        return Usage.parse(self.ctl("usage"))

    def close(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


@dataclass(frozen=True)
class Usage:
    """`vgpu-standin-ctl usage`, parsed: memory in use and busy time, per GPU and process."""

    used: dict[str, int]
    held: dict[tuple[str, int], int]
    busy_ns: dict[tuple[str, int], int]

    @classmethod
    def parse(cls, text: str) -> Usage:
        used: dict[str, int] = {}
        held: dict[tuple[str, int], int] = {}
        busy: dict[tuple[str, int], int] = {}
        for kind, uuid, a, *rest in (line.split() for line in text.splitlines()):
            if kind == "gpu":
                used[uuid] = int(rest[0])
            elif kind == "proc":
                held[uuid, int(a)] = int(rest[0])
            elif kind == "busy":
                busy[uuid, int(a)] = int(rest[0])
        return cls(used, held, busy)
