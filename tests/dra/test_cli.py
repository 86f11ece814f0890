"""`vgpu dra-driver` flags: bad values are refused naming the flag, before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from vgpu.cli.main import main
from vgpu.daemons.dra_driver.driver import DraConfig
from vgpu.node.container_dirs import DirBounds
from vgpu.node.driver_mode import DriverLimits


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--memory-unit-mib", "0"], "--memory-unit-mib: must be a positive number of MiB"),
        (["--resync-s", "0"], "--resync-s: must be a positive number of seconds"),
        (["--resync-s", "nan"], "--resync-s: must be a positive number of seconds"),
        (["--resync-s", "inf"], "--resync-s: must be a positive number of seconds"),
        (["--resync-s", "1e300"], "--resync-s: must be a positive number of seconds"),
        (["--join-poll-s", "nan"], "--join-poll-s: must be a positive number of seconds"),
        (["--join-poll-s", "inf"], "--join-poll-s: must be a positive number of seconds"),
        (["--xid-ignore", "13,x"], "--xid-ignore"),
        # nan: `now - t < nan` is never true, so no XID ever marked a GPU unhealthy
        (["--health-recovery-s", "nan"], "--health-recovery-s: must be a number of seconds"),
        (["--health-recovery-s", "inf"], "--health-recovery-s: must be a number of seconds"),
        (["--fake-gpus", "2xNOPE", "--kubeconfig", "/nonexistent"], "kubeconfig"),
    ],
)
def test_bad_flags_name_the_flag(
    flags: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["dra-driver", "--fake-gpus", "1xT4", *flags]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_help_names_the_slice_orders(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["dra-driver", "--help"])
    assert "fullest" in capsys.readouterr().out


def _config(monkeypatch: pytest.MonkeyPatch, *flags: str) -> DraConfig:
    """The config `vgpu dra-driver` builds from `flags` (no API server)."""
    from vgpu.adapters.kube.dra_calls import DraKubeApi
    from vgpu.cli.main import _load, _parser
    from vgpu.daemons.dra_driver.cli import build

    monkeypatch.setattr(DraKubeApi, "from_environment", lambda _: DraKubeApi(None))
    parser, sub = _parser()
    _load("dra-driver", sub)
    return build(parser.parse_args(["dra-driver", "--fake-gpus", "1xT4", *flags])).config


def test_the_driver_memory_flags_reach_the_drivers_config(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`vgpu dra-driver` takes the node agent's driver-limit flags into its own config."""
    flags = ["--driver-memory-limits", "on", "--driver-soft-limits", "--cgroupfs", str(tmp_path)]
    config = _config(monkeypatch, *flags)
    assert config.driver_limits is DriverLimits.ON and config.driver_soft_limits
    assert config.cgroupfs == tmp_path


def test_the_hook_and_join_flags_reach_the_drivers_config(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    flags = ["--cdi-hook-program", str(tmp_path / "h"), "--state-dir", str(tmp_path / "s")]
    config = _config(monkeypatch, *flags, "--join-poll-s", "2.5")
    assert config.hook_program == tmp_path / "h" and config.join_poll_s == 2.5
    assert config.hook_socket == tmp_path / "s" / "dra" / "hook.sock"


def test_the_container_dir_bounds_reach_the_claims_directories(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The claims' directories are bounded per pod and per namespace by the node agent's flags."""
    bounds = ["--max-container-dirs-per-pod=3", "--max-container-dirs-per-namespace=5"]
    dirs = _config(monkeypatch, "--state-dir", str(tmp_path), *bounds).dirs
    assert dirs is not None and dirs.bounds == DirBounds(namespace=5, pod=3)
