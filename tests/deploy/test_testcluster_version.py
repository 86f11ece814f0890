"""The test cluster reports the Kubernetes release it runs (it once reported
`v0.0.0-master+$Format:%H$`, so `kubectl version` failed and the chart's kubeVersion check
refused `helm install --dry-run=server` against it).

hack/testcluster/build.sh stamps the version pinned in hack/testcluster/go.mod into
component-base (what the API server's /version and `--version` report) and client-go (the user
agent), as Kubernetes' own build does; CI (.ci/run) and the realk8s tier build with it."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "hack" / "testcluster" / "build.sh"


def pinned() -> str:
    text = (ROOT / "hack" / "testcluster" / "go.mod").read_text()
    match = re.search(r"^\s*k8s\.io/kubernetes (v\d+\.\d+\.\d+)$", text, re.M)
    assert match
    return match.group(1)


def ldflags() -> list[str]:
    done = subprocess.run(
        ["bash", str(SCRIPT), "--ldflags"], capture_output=True, text=True, check=True
    )
    return done.stdout.split()


def test_the_build_stamps_the_pinned_version_into_both_version_packages() -> None:
    version = pinned()
    major, minor = version[1:].split(".")[:2]
    flags = ldflags()
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        assert f"{pkg}.gitVersion={version}" in flags
        assert f"{pkg}.gitMajor={major}" in flags and f"{pkg}.gitMinor={minor}" in flags


def test_the_pinned_version_passes_the_charts_kube_version_check() -> None:
    """Chart.yaml's kubeVersion (semver range, as helm checks it) admits the cluster."""
    chart = yaml.safe_load((ROOT / "charts" / "vgpu" / "Chart.yaml").read_text())
    low = re.search(r">=\s*(\d+)\.(\d+)", chart["kubeVersion"])
    assert low, chart["kubeVersion"]
    major, minor = (int(x) for x in pinned()[1:].split(".")[:2])
    assert (major, minor) >= (int(low.group(1)), int(low.group(2)))


def test_ci_and_the_realk8s_tier_build_with_the_script() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    assert "bash hack/testcluster/build.sh" in ci and "go build" not in ci
    helper = (ROOT / "tests" / "realk8s" / "binary.py").read_text()
    assert "BUILD_SCRIPT" in helper and '"build"' not in helper
