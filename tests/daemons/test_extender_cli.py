"""`vgpu extender` refuses a bad --resource-domain in one line, before it connects anywhere."""

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
