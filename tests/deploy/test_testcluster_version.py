"""The test cluster reports the Kubernetes release it runs (it once reported
`v0.0.0-master+$Format:%H$`, so `kubectl version` failed and the chart's kubeVersion check
refused `helm install --dry-run=server` against it).

hack/testcluster/build.sh stamps the version pinned in hack/testcluster/go.mod into
component-base (what the API server's /version and `--version` report) and client-go (the user
agent), as Kubernetes' own build does; CI (.ci/run) and the realk8s tier build with it."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.realk8s import binary

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


def pins() -> dict[str, Path]:
    """Every module file build.sh can build from, by the minor version it pins."""
    files = [ROOT / "hack" / "testcluster" / "go.mod"]
    files += sorted((ROOT / "hack" / "testcluster").glob("v1.*.mod"))
    found: dict[str, Path] = {}
    for path in files:
        match = re.search(r"^\s*k8s\.io/kubernetes v1\.(\d+)\.\S+$", path.read_text(), re.M)
        assert match, path
        found[f"1.{match.group(1)}"] = path
    return found


def test_each_pin_moves_every_staging_module_to_its_own_release() -> None:
    """A staging module left at another release mixes two Kubernetes versions in one binary."""
    for minor, path in pins().items():
        text = path.read_text()
        staging = re.findall(r"^\s*k8s\.io/\S+ => k8s\.io/\S+ v0\.(\d+)\.\S+$", text, re.M)
        assert staging and set(staging) == {minor.split(".")[1]}, path.name


def test_every_pinned_version_is_selectable_and_stamped() -> None:
    """`build.sh --k8s 1.N` builds the pin of 1.N, and a pre-release gets Kubernetes' "N+" minor."""
    for minor, path in pins().items():
        version = re.search(r"^\s*k8s\.io/kubernetes (v\S+)$", path.read_text(), re.M)
        assert version
        done = subprocess.run(
            ["bash", str(SCRIPT), "--k8s", minor, "--ldflags"],
            capture_output=True,
            text=True,
            check=True,
        )
        stamped = "+" if "-" in version.group(1) else ""
        assert f"k8s.io/component-base/version.gitVersion={version.group(1)}" in done.stdout
        assert f"version.gitMinor={minor.split('.')[1]}{stamped} " in done.stdout + " "


def test_an_unpinned_version_is_refused_by_name() -> None:
    done = subprocess.run(
        ["bash", str(SCRIPT), "--k8s", "1.99", "--ldflags"], capture_output=True, text=True
    )
    assert done.returncode != 0 and "--k8s 1.99" in done.stderr


def test_the_tier_builds_the_version_its_environment_selects(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(binary.K8S_ENV, raising=False)
    assert binary.selected() == ([], binary.BINARY)
    monkeypatch.setenv(binary.K8S_ENV, "1.38")
    args, path = binary.selected()
    assert args == ["--k8s", "1.38"] and path.name == "testcluster-v1.38"
    monkeypatch.setenv(binary.K8S_ENV, "v1.38.0")
    with pytest.raises(binary.Unavailable, match=binary.K8S_ENV):
        binary.selected()


def test_the_chart_is_rendered_for_the_version_the_selected_cluster_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The tier renders the chart with `--kube-version` of the cluster it starts, so the chart's
    version guards are those a user of that release gets, on either version."""
    for minor in ("", *sorted(m.stem[1:] for m in binary.GO_MODULE.glob("v1.*.mod"))):
        monkeypatch.setenv(binary.K8S_ENV, minor)
        args = ["--k8s", minor] if minor else []
        stamped = subprocess.run(
            ["bash", str(SCRIPT), *args, "--ldflags"], capture_output=True, text=True, check=True
        ).stdout
        assert f"gitVersion={binary.kube_version()} " in stamped + " "
    monkeypatch.setenv(binary.K8S_ENV, "1.99")
    with pytest.raises(binary.Unavailable, match=r"1\.99"):
        binary.kube_version()


def test_a_relative_output_is_the_callers_path(tmp_path: Path) -> None:
    """.ci/run names its output from the repository root while build.sh works in its own
    directory: the binary must land where the caller said (a `go` stand-in records the flags)."""
    fake = tmp_path / "fakebin"
    fake.mkdir()
    record = tmp_path / "args"
    (fake / "go").write_text(
        f'#!/bin/sh\n[ "$1" = env ] && {{ echo go1.26.8; exit 0; }}\necho "$@" > {record}\n'
    )
    (fake / "go").chmod(0o755)
    env = {**os.environ, "PATH": f"{fake}:{os.environ['PATH']}"}
    subprocess.run(["bash", str(SCRIPT), "out/tc"], cwd=tmp_path, env=env, check=True)
    assert f"-o {tmp_path / 'out' / 'tc'} " in record.read_text()
