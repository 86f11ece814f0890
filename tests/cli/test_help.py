"""Every flag of every subcommand explains itself and shows its default; help examples run."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest
import yaml

from vgpu.adapters.fakegpu import FakeGpuBackend
from vgpu.cli.main import COMMANDS, _load, _parser, log_level
from vgpu.daemons.extender.cli import DEFAULT_LEASE_NAMESPACE, DEFAULT_PORT
from vgpu.daemons.flags.gpu import FAKE_GPUS_EXAMPLE
from vgpu.flags import shown_default

ROOT = Path(__file__).resolve().parents[2]


def subparser(command: str) -> argparse.ArgumentParser:
    _, sub = _parser()
    _load(command, sub)
    return sub.choices[command]


def flags(command: str) -> list[argparse.Action]:
    return [a for a in subparser(command)._actions if a.option_strings and a.dest != "help"]


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_flag_has_help(command: str) -> None:
    assert [a.option_strings[0] for a in flags(command) if not a.help] == []


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_help_shows_every_set_default(command: str) -> None:
    text = "".join(subparser(command).format_help().split())
    for action in flags(command):
        if action.default in (None, False) or action.dest == "sub_verbose":
            continue
        if isinstance(action.default, bool) or action.default == []:
            assert "default" in (action.help or ""), action.option_strings[0]
            continue
        shown = "".join(shown_default(action.default).split())
        assert shown in text, f"{action.option_strings[0]}: default {shown!r} not in --help"


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_help_shows_defaults_as_typed_never_as_reprs(command: str) -> None:
    text = subparser(command).format_help()
    assert re.findall(r"\b[A-Z]\w+\(\w+=", text) == []
    assert " object at 0x" not in text


def test_fake_gpus_help_examples_parse() -> None:
    for example in FAKE_GPUS_EXAMPLE.split(" or "):
        assert FakeGpuBackend.from_spec(example).inventory().gpus


def test_verbose_steps() -> None:
    assert log_level(0, daemon=True) == 20 and log_level(1, daemon=True) == 10
    assert log_level(0, daemon=False) == 30 and log_level(1, daemon=False) == 20
    assert log_level(5, daemon=False) == 10


def test_extender_defaults_are_the_manifests() -> None:
    """The CLI defaults are the documented ones, which the manifests pass explicitly too."""
    manifest = ROOT / "daemonset" / "extender.yaml"
    if not manifest.exists():
        pytest.skip("no kustomize manifests in this tree")
    docs = list(yaml.safe_load_all(manifest.read_text()))
    deploy = next(d for d in docs if d and d.get("kind") == "Deployment")
    args = deploy["spec"]["template"]["spec"]["containers"][0]["args"]
    assert f"--port={DEFAULT_PORT}" in args
    assert f"--lease-namespace={DEFAULT_LEASE_NAMESPACE}" in args
    values = yaml.safe_load((ROOT / "charts" / "vgpu" / "values.yaml").read_text())
    assert values["extender"]["port"] == DEFAULT_PORT


@pytest.mark.parametrize("module", ["vgpu", "vgpu.cli.main"])
def test_runs_as_a_module(module: str) -> None:
    """`python -m vgpu` works where the `vgpu` script is not on PATH (e.g. a bare venv)."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", module, "--help"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "simulate" in done.stdout
