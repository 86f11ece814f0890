"""Building the Kubernetes components of the test cluster (hack/testcluster, one Go binary).

The Go build cache makes a rebuild after the first one a matter of seconds; the binary is never
committed. Without Go the real-cluster tier cannot run: `Unavailable` says why, and the caller
decides whether that is a skip (a developer's machine) or a failure (CI).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

GO_MODULE = Path(__file__).resolve().parents[2] / "hack" / "testcluster"
BINARY = GO_MODULE / "bin" / "testcluster"
BUILD_SCRIPT = GO_MODULE / "build.sh"
BUILD_TIMEOUT_S = 3600
K8S_ENV = "VGPU_REALK8S_K8S"
"""Selects the Kubernetes minor version the tier runs (`1.38`: hack/testcluster/v1.38.mod);
unset, build.sh's default. Each version is its own binary, so both can stay built."""


def selected() -> tuple[list[str], Path]:
    """build.sh's version arguments and the binary for the version `K8S_ENV` selects."""
    minor = os.environ.get(K8S_ENV, "")
    if not minor:
        return [], BINARY
    if not re.fullmatch(r"1\.\d+", minor):
        raise Unavailable(f"{K8S_ENV}={minor!r}: expected a minor version such as 1.38")
    return ["--k8s", minor], BINARY.with_name(f"testcluster-v{minor}")


def kube_version() -> str:
    """The Kubernetes release the selected binary runs (`v1.37.2`), from the module file build.sh
    builds it from (go.mod when that pins the minor, else `v1.MINOR.mod`): what `helm template
    --kube-version` must be told so the chart's version guards see this cluster."""
    args, _ = selected()
    minor = args[1] if args else ""
    for name in ("go.mod", f"v{minor}.mod" if minor else ""):
        path = GO_MODULE / name
        if not name or not path.is_file():
            continue
        found = re.search(r"^\s*k8s\.io/kubernetes (v\d+\.\d+\.\d+\S*)", path.read_text(), re.M)
        if found and found.group(1).startswith(f"v{minor}." if minor else "v"):
            return found.group(1)
    raise Unavailable(f"{K8S_ENV}={minor!r}: hack/testcluster pins no such k8s.io/kubernetes")


class Unavailable(Exception):
    """The test cluster cannot be built here; the message says why and how to fix it."""


def build() -> tuple[Path, float]:
    """Build (or refresh) the selected version's binary; returns its path and the seconds the
    build took."""
    if shutil.which("go") is None:
        raise Unavailable(
            "the real-cluster tier needs Go (>= 1.26) on PATH to build hack/testcluster"
        )
    version, binary = selected()
    started = time.monotonic()
    done = subprocess.run(  # the script .ci/run uses: it stamps the Kubernetes version
        ["bash", str(BUILD_SCRIPT), *version, str(binary)],
        cwd=GO_MODULE,
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_S,
    )
    if done.returncode != 0:
        raise Unavailable(f"building hack/testcluster failed:\n{done.stderr[-4000:]}")
    return binary, time.monotonic() - started


INTERPOSER_SCRIPT = GO_MODULE.parents[1] / "hack" / "build-interposer.sh"


def build_interposer(out: Path) -> str:
    """vgpu-core built as the image builds it (hack/build-interposer.sh) into `out`; the path of
    the library, for an agent's `--vgpu-core-library`."""
    built = subprocess.run(
        ["bash", str(INTERPOSER_SCRIPT), str(out)], capture_output=True, text=True, check=True
    )
    return built.stdout.strip().splitlines()[-1]
