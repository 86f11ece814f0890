"""hack/release.sh builds what a user installs: the wheel and sdist, the Helm package, and the
krew archive with a manifest whose sha256 is the archive's; every version is the package's,
and the krew launcher runs the report from the wheel alone. Needs helm (skips without it,
except under CI=true) and the `build` package (in the test extra)."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest
import yaml

from tests.deploy.test_chart import _helm_or_skip

ROOT = Path(__file__).resolve().parents[2]
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    _helm_or_skip()
    out = tmp_path_factory.mktemp("dist")
    env = {**os.environ, "PYTHON": sys.executable}
    subprocess.run(
        ["bash", str(ROOT / "hack/release.sh"), str(out), "--repo", "example/vgpu"],
        check=True, env=env, capture_output=True, timeout=300,
    )  # fmt: skip
    return out


def test_every_artifact_is_built_and_listed_with_its_sha256(release: Path) -> None:
    names = {
        f"vgpu-{VERSION}-py3-none-any.whl", f"vgpu-{VERSION}.tar.gz", f"vgpu-{VERSION}.tgz",
        f"kubectl-inspect-vgpu-{VERSION}.tar.gz", "inspect-vgpu.yaml",
    }  # fmt: skip
    assert names <= {p.name for p in release.iterdir()}
    sums: dict[str, str] = {}
    for line in (release / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split()
        sums[name] = digest
    assert set(sums) == names
    for name, digest in sums.items():
        assert hashlib.sha256((release / name).read_bytes()).hexdigest() == digest


def test_the_krew_manifest_names_the_archive_and_its_sha256(release: Path) -> None:
    manifest = yaml.safe_load((release / "inspect-vgpu.yaml").read_text())
    assert manifest["kind"] == "Plugin" and manifest["metadata"]["name"] == "inspect-vgpu"
    assert manifest["spec"]["version"] == f"v{VERSION}"
    (platform,) = manifest["spec"]["platforms"]
    archive = release / f"kubectl-inspect-vgpu-{VERSION}.tar.gz"
    assert platform["sha256"] == hashlib.sha256(archive.read_bytes()).hexdigest()
    assert platform["uri"] == (
        f"https://github.com/example/vgpu/releases/download/v{VERSION}/{archive.name}"
    )
    with tarfile.open(archive) as tar:
        assert platform["bin"] in tar.getnames()


def test_the_chart_and_the_wheel_carry_the_package_version(release: Path) -> None:
    with tarfile.open(release / f"vgpu-{VERSION}.tgz") as tar:
        member = tar.extractfile("vgpu/Chart.yaml")
        assert member is not None
        chart = yaml.safe_load(member.read())
    assert chart["version"] == chart["appVersion"] == VERSION
    with zipfile.ZipFile(release / f"vgpu-{VERSION}-py3-none-any.whl") as wheel:
        metadata = wheel.read(f"vgpu-{VERSION}.dist-info/METADATA").decode()
    assert f"\nVersion: {VERSION}\n" in metadata


def test_the_krew_launcher_runs_the_report_from_the_wheel(release: Path, tmp_path: Path) -> None:
    with tarfile.open(release / f"kubectl-inspect-vgpu-{VERSION}.tar.gz") as tar:
        tar.extractall(tmp_path / "plugin", filter="data")
    snapshot = tmp_path / "c.json"
    snapshot.write_text('{"apiVersion": "vgpu.io/v1alpha1", "kind": "ClusterSnapshot"}')
    env = {"PATH": os.environ["PATH"], "VGPU_PYTHON": sys.executable}
    found = subprocess.run(
        [str(tmp_path / "plugin/kubectl-inspect-vgpu"), "--fake-cluster", str(snapshot)],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60,
    )  # fmt: skip
    assert found.returncode == 0, found.stderr
    assert "No node shown has vgpu GPUs" in found.stdout


def test_versions_that_disagree_build_nothing(tmp_path: Path) -> None:
    for part in ("hack/release.sh", "pyproject.toml", "charts/vgpu/Chart.yaml"):
        (tmp_path / part).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / part, tmp_path / part)
    chart = tmp_path / "charts/vgpu/Chart.yaml"
    chart.write_text(chart.read_text().replace(f"version: {VERSION}", "version: 9.9.9", 1))
    found = subprocess.run(
        ["bash", str(tmp_path / "hack/release.sh"), str(tmp_path / "out")],
        capture_output=True, text=True, env={**os.environ, "PYTHON": sys.executable, "HELM": "/bin/true"},
    )  # fmt: skip
    assert found.returncode == 1
    assert "versions disagree" in found.stderr and "version 9.9.9" in found.stderr
    assert not (tmp_path / "out").exists()


def test_ci_runs_the_checks_on_every_push_and_releases_on_a_tag() -> None:
    workflow = yaml.safe_load((ROOT / ".github/workflows/ci.yml").read_text())
    triggers = workflow[True]  # YAML 1.1 reads the key `on` as true
    assert "pull_request" in triggers and triggers["push"]["tags"] == ["v*"]
    test_steps = [s.get("run", "") for s in workflow["jobs"]["test"]["steps"]]
    assert "bash .ci/run" in test_steps
    release = workflow["jobs"]["release"]
    assert release["needs"] == "test" and "refs/tags/v" in release["if"]
    runs = "\n".join(s.get("run", "") for s in release["steps"])
    assert "bash hack/release.sh dist" in runs and "helm push dist/vgpu-" in runs
