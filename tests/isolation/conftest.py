"""Fixtures of the isolation tier: the interposer (plain and ASan+UBSan builds), the stand-in
driver libraries, the test programs, and a sandbox on a fresh simulated node per test.

In CI (CI=true) nothing of the tier may be skipped: a missing tool or a non-root user fails the
run instead, as for the real-cluster tier, so CI never passes on tests that did not run."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from tests.isolation import standins
from tests.isolation.sandbox import Container, Sandbox, grant_for
from vgpu.node.grants import GpuLimit

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = Path(__file__).parent / "programs"
GIB = 1 << 30
MIB = 1 << 20

IN_CI = os.environ.get("CI") == "true"

if shutil.which("bwrap") is None or shutil.which("cc") is None:
    _MISSING = "the isolation tier needs bwrap (Debian: bubblewrap) and cc"
    if IN_CI:
        pytest.fail(_MISSING, pytrace=False)
    pytest.skip(_MISSING, allow_module_level=True)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """In CI a skipped test of the tier is reported failed, with the skip's reason."""
    outcome = yield
    report: pytest.TestReport = outcome.get_result()  # type: ignore[attr-defined]
    if IN_CI and report.skipped and not hasattr(report, "wasxfail"):
        why = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = f"skipped in CI, where the isolation tier must run whole: {why}"


@dataclass(frozen=True)
class Build:
    library: Path
    standins: standins.Standins
    cuload: Path
    ld_cache: Path
    asan_runtime: str | None


_SANITIZERS = {"address,undefined": ["--sanitize"], "undefined": ["--sanitize=undefined"]}


def _build(root: Path, sanitize: str | None = None) -> Build:
    """`sanitize`: None (the release build), "address,undefined" or "undefined" (UBSan alone,
    with the plain stand-ins: nothing then needs the ASan runtime loaded first)."""
    asan = sanitize == "address,undefined"
    done = subprocess.run(
        [
            str(ROOT / "hack/build-interposer.sh"),
            *_SANITIZERS.get(sanitize or "", []),
            str(root / "core"),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    library = Path(done.stdout.strip().splitlines()[-1])
    built = standins.cached_build(root, sanitize=asan)
    cuload = root / "cuload"
    subprocess.run(
        [
            "cc",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-O1",
            "-o",
            str(cuload),
            str(PROGRAMS / "cuload.c"),
            f"-L{built.dir}",
            "-l:libcuda.so.1",
            "-lpthread",
        ],
        check=True,
    )
    cache = _ld_cache(built)
    runtime = None
    if asan:
        runtime = subprocess.run(
            ["cc", "-print-file-name=libasan.so"], capture_output=True, text=True, check=True
        ).stdout.strip()
    return Build(library, built, cuload, cache, runtime)


def _ld_cache(built: standins.Standins) -> Path:
    """A loader cache (the sandbox's /etc/ld.so.cache) that finds `built`'s libraries first."""
    conf = built.dir.with_name(f"{built.dir.name}.ld.so.conf")  # beside it: ldconfig reads it all
    conf.write_text(f"include /etc/ld.so.conf.d/*.conf\n{built.dir}\n")
    cache = built.dir.with_name(f"{built.dir.name}.ld.so.cache")
    subprocess.run(["ldconfig", "-X", "-C", str(cache), "-f", str(conf)], check=True)
    return cache


def build_without(build: Build, *names: str) -> Build:
    """`build`'s interposer and programs over stand-ins that lack `names` everywhere (symbols and
    cuGetProcAddress), as an older driver would."""
    built = standins.cached_build(
        build.cuload.parent, sanitize=build.standins.sanitized, omit=names
    )
    return replace(build, standins=built, ld_cache=_ld_cache(built))


def build_program(build: Build, name: str) -> Path:
    """programs/NAME.c, built once next to cuload (visible in the sandbox), linked against the
    stand-in driver."""
    out = build.cuload.parent / name
    if not out.exists():
        source = [str(PROGRAMS / f"{name}.c"), f"-L{build.standins.dir}", "-l:libcuda.so.1"]
        subprocess.run(
            ["cc", "-Wall", "-Wextra", "-Werror", "-O1", "-o", str(out), *source], check=True
        )
    return out


@pytest.fixture(scope="session", params=["plain", "sanitized"])
def build(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Build:
    """The interposer and stand-ins, once per session and variant (ASan+UBSan in `sanitized`)."""
    sanitize = "address,undefined" if request.param == "sanitized" else None
    return _build(tmp_path_factory.mktemp(f"build-{request.param}"), sanitize)


@pytest.fixture(scope="session")
def deepbind_build(build: Build, tmp_path_factory: pytest.TempPathFactory) -> Build:
    """`build`, with its ASan+UBSan variant replaced by UBSan alone: ASan's runtime refuses any
    `dlopen` with RTLD_DEEPBIND by design (its interceptor aborts the process, since the opened
    library would bind around the runtime's own interposed functions), so the sanitized tier runs
    what needs that flag under UBSan, which interposes nothing of the loader's."""
    if build.asan_runtime is None:
        return build
    return _build(tmp_path_factory.mktemp("build-undefined"), "undefined")


@pytest.fixture(scope="session")
def plain_build(tmp_path_factory: pytest.TempPathFactory) -> Build:
    """The release build only: for the timing tests (sanitizers change their cost)."""
    return _build(tmp_path_factory.mktemp("build-timing"))


class Cluster:
    """A simulated node with the sandbox and a way to admit containers on it."""

    def __init__(self, build: Build, gpus: int | Sequence[standins.StandinGpu], tmp: Path) -> None:
        """`gpus`: how many (T4-like, UUIDs from `tmp`), or the node's GPUs as given."""
        self.build = build
        listed = standins.node_gpus(gpus, seed=str(tmp)) if isinstance(gpus, int) else list(gpus)
        self.node = standins.Node(build.standins, listed, dir=tmp)
        env = {"PATH": "/usr/bin:/bin"}
        if build.asan_runtime:
            env["ASAN_OPTIONS"] = "detect_leaks=0"
        self.sandbox = Sandbox(
            self.node,
            build.ld_cache,
            visible=(build.cuload.parent, ROOT / "tests"),
            preload_first=build.asan_runtime,
            env_base=env,
        )
        self.state = tmp / "agent"

    @property
    def uuids(self) -> list[str]:
        return [g.uuid for g in self.node.gpus]

    def admit(
        self, shares: list[tuple[int, int, int]], cores_limit: int | None = None
    ) -> Container:
        """A container holding (gpu index, cores, memory MiB) shares, as the agent answers it."""
        gpus = [GpuLimit(self.uuids[i], cores, mib) for i, cores, mib in shares]
        return grant_for(self.build.library, self.state, gpus, cores_limit)

    def cuload(
        self, container: Container, *args: str, **kw: object
    ) -> subprocess.CompletedProcess[str]:
        return self.sandbox.run(container, [str(self.build.cuload), *args], **kw)  # type: ignore[arg-type]


@pytest.fixture
def cluster(build: Build, tmp_path: Path) -> Iterator[Cluster]:
    yield Cluster(build, 2, tmp_path)


@pytest.fixture
def timing_cluster(plain_build: Build, tmp_path: Path) -> Iterator[Cluster]:
    yield Cluster(plain_build, 2, tmp_path)
