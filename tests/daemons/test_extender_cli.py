"""`vgpu extender` refuses a bad flag value in one line naming the flag, before it connects
anywhere."""

from __future__ import annotations

import pytest

from vgpu.cli.main import main


def test_a_bad_resource_domain_is_one_clear_line(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--kubeconfig", "/nonexistent", "--insecure-http", "--resource-domain", "Vgpu.IO"]
    assert main(["extender", *args]) == 2
    err = capsys.readouterr().err
    assert "--resource-domain: 'Vgpu.IO' is not a DNS subdomain" in err
    assert "Traceback" not in err and "/nonexistent" not in err


def test_a_negative_filter_best_is_one_clear_line(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--kubeconfig", "/nonexistent", "--insecure-http", "--filter-best", "-1"]
    assert main(["extender", *args]) == 2
    err = capsys.readouterr().err
    assert "--filter-best -1: give 0 (every node) or more" in err
    assert "Traceback" not in err


def test_an_unknown_policy_names_the_flag_once(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["extender", "--kubeconfig", "/nonexistent", "--insecure-http", "--policy", "tetris"])
    err = capsys.readouterr().err
    assert "argument --policy: unknown policy 'tetris' (choose one of" in err
    assert "--policy: --policy" not in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--gang-timeout", "0"),
        ("--gang-timeout", "nan"),
        ("--gang-timeout", "inf"),
        ("--gang-timeout", "1e300"),
        ("--bind-wait", "-1"),
        ("--bind-wait", "nan"),
        ("--bind-wait", "inf"),
    ],
)
def test_a_wait_no_clock_can_keep_is_one_clear_line(
    flag: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`nan` and `inf` were taken: a gang reservation that never expires (`now + nan` is never
    past), and a gang bind whose wait never ends (`nan`: a busy loop in the HTTP call); a
    negative --bind-wait was refused as "--gang-timeout and --memory-unit-mib must be
    positive", naming neither the flag given nor its range."""
    args = ["--kubeconfig", "/nonexistent", "--insecure-http", flag, value]
    assert main(["extender", *args]) == 2
    err = capsys.readouterr().err
    assert f"{flag}: must be" in err and "86400" in err and "(got " in err
    assert "Traceback" not in err and "/nonexistent" not in err
