"""On a plain `pip install vgpu` (no extras) every command answers in one line, never a traceback:
the daemons name the extra to install, and the report's `--help` works."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.cli.plain import run_plain


@pytest.mark.parametrize(
    ("argv", "extra"),
    [
        (["node-agent", "--fake-gpus", "1xT4"], ".[node]"),
        (["extender"], ".[extender]"),
    ],
)
def test_daemon_without_its_extra_names_the_extra(argv: list[str], extra: str) -> None:
    done = run_plain("vgpu", *argv)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert f"pip install '{extra}'" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


@pytest.mark.parametrize(
    ("script", "argv"),
    [
        ("kubectl-inspect-vgpu", ["--help"]),
        ("vgpu", ["inspect", "--help"]),
        ("vgpu", ["node-agent", "--help"]),
        ("vgpu", ["extender", "--help"]),
    ],
)
def test_help_works_without_extras(script: str, argv: list[str]) -> None:
    done = run_plain(script, *argv)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage:")


def test_report_without_client_names_the_extra() -> None:
    done = run_plain("kubectl-inspect-vgpu", "--kubeconfig", "/nonexistent")
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert "pip install '.[cli]'" in done.stderr


def test_no_hint_sends_anyone_to_a_package_index() -> None:
    """vgpu is installed from a checkout: a hint naming `vgpu[...]` points at PyPI, where no
    such project is. Every hint goes through `vgpu.extras.install_hint`."""
    root = Path(__file__).resolve().parents[2] / "vgpu"
    named = [
        f"{path.relative_to(root.parent)}:{n}"
        for path in sorted(root.rglob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"install\W+vgpu\[", line)
    ]
    assert named == []


def test_the_yaml_example_without_the_cli_extra_says_to_install_it() -> None:
    """The README's `--fake-cluster examples/cluster-snapshot.yaml` on a plain install: one
    line naming what to install from the checkout (the quick start installs '.[cli]')."""
    example = Path(__file__).resolve().parents[2] / "examples" / "cluster-snapshot.yaml"
    done = run_plain("kubectl-inspect-vgpu", "--fake-cluster", str(example), "-d")
    assert done.returncode == 1, done.stderr
    assert done.stderr.strip() == (
        "error: this needs the Python package 'yaml', not installed: "
        "pip install '.[cli]' (in a vgpu checkout)"
    )
