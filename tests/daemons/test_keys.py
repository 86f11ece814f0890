from pathlib import Path

import pytest

from vgpu.core.errors import ConfigError
from vgpu.daemons.flags.keys import DEV_KEY, DEV_KEY_FLAG, KEY_ENV, load_assignment_key


def test_file_key_is_stripped_like_a_mounted_secret(tmp_path: Path) -> None:
    key = tmp_path / "key"
    key.write_bytes(b"0123abcd\n")
    assert load_assignment_key(key) == b"0123abcd"


def test_env_key_and_development_fallback_only_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, " s3cret ")
    assert load_assignment_key(None) == b"s3cret"
    monkeypatch.delenv(KEY_ENV)
    with pytest.raises(ConfigError, match=f"no assignment key configured.*{DEV_KEY_FLAG}"):
        load_assignment_key(None)
    assert load_assignment_key(None, allow_development_key=True) == DEV_KEY


def test_the_development_key_configured_explicitly_is_refused_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = tmp_path / "key"
    key.write_bytes(DEV_KEY + b"\n")
    with pytest.raises(ConfigError, match="public development key"):
        load_assignment_key(key)
    monkeypatch.setenv(KEY_ENV, DEV_KEY.decode())
    with pytest.raises(ConfigError, match="public development key"):
        load_assignment_key(None)
    assert load_assignment_key(key, allow_development_key=True) == DEV_KEY


@pytest.mark.parametrize(
    ("content", "message"),
    [(b"", "is empty"), (b"REPLACE-ME-with-openssl-rand-hex-32\n", "placeholder")],
)
def test_empty_or_placeholder_key_is_refused(tmp_path: Path, content: bytes, message: str) -> None:
    key = tmp_path / "key"
    key.write_bytes(content)
    with pytest.raises(ConfigError, match=message):
        load_assignment_key(key)


def test_missing_file_names_the_flag(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--assignment-key-file: cannot read"):
        load_assignment_key(tmp_path / "absent")


def test_both_daemons_use_the_same_loader() -> None:
    import vgpu.daemons.extender.cli as extender_cli
    import vgpu.daemons.node_agent.cli as node_cli

    # read through the modules' namespaces: what each daemon calls is the shared loader
    assert vars(node_cli)["load_assignment_key"] is load_assignment_key
    assert vars(extender_cli)["load_assignment_key"] is load_assignment_key


@pytest.mark.parametrize("command", ["node-agent", "extender"])
def test_daemons_refuse_to_start_without_a_key(
    command: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Fail closed: no key, no daemon; the one line names both ways to give one and the flag."""
    from vgpu.cli.main import main

    monkeypatch.delenv(KEY_ENV, raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-kubeconfig"))
    argv = {
        "node-agent": ["--fake-gpus", "1xT4", "--device-plugin-dir", str(tmp_path)],
        "extender": ["--insecure-http", "--no-leader-elect"],
    }[command]
    assert main([command, *argv]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    for needle in ("--assignment-key-file", KEY_ENV, DEV_KEY_FLAG):
        assert needle in err, err
