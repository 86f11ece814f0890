"""`vgpu dra-driver` flags: bad values are refused naming the flag, before anything starts."""

from __future__ import annotations

import pytest

from vgpu.cli.main import main


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--memory-unit-mib", "0"], "--memory-unit-mib: must be a positive number of MiB"),
        (["--resync-s", "0"], "--resync-s: must be a positive number of seconds"),
        (["--xid-ignore", "13,x"], "--xid-ignore"),
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
