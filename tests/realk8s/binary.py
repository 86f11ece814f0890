"""Building the Kubernetes components of the test cluster (hack/testcluster, one Go binary).

The Go build cache makes a rebuild after the first one a matter of seconds; the binary is never
committed. Without Go the real-cluster tier cannot run: `Unavailable` says why, and the caller
decides whether that is a skip (a developer's machine) or a failure (CI).
"""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

GO_MODULE = Path(__file__).resolve().parents[2] / "hack" / "testcluster"
BINARY = GO_MODULE / "bin" / "testcluster"
BUILD_SCRIPT = GO_MODULE / "build.sh"
BUILD_TIMEOUT_S = 3600


class Unavailable(Exception):
    """The test cluster cannot be built here; the message says why and how to fix it."""


def build(binary: Path = BINARY) -> tuple[Path, float]:
    """Build (or refresh) the binary; returns its path and the seconds the build took."""
    if shutil.which("go") is None:
        raise Unavailable(
            "the real-cluster tier needs Go (>= 1.26) on PATH to build hack/testcluster"
        )
    started = time.monotonic()
    done = subprocess.run(  # the script .ci/run uses: it stamps the Kubernetes version
        ["bash", str(BUILD_SCRIPT), str(binary)],
        cwd=GO_MODULE,
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_S,
    )
    if done.returncode != 0:
        raise Unavailable(f"building hack/testcluster failed:\n{done.stderr[-4000:]}")
    return binary, time.monotonic() - started
