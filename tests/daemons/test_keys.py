from pathlib import Path

import pytest

from vgpu.core.errors import ConfigError
from vgpu.daemons.keys import DEV_KEY, KEY_ENV, load_assignment_key


def test_file_key_is_stripped_like_a_mounted_secret(tmp_path: Path) -> None:
    key = tmp_path / "key"
    key.write_bytes(b"0123abcd\n")
    assert load_assignment_key(key) == b"0123abcd"


def test_env_key_and_development_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, " s3cret ")
    assert load_assignment_key(None) == b"s3cret"
    monkeypatch.delenv(KEY_ENV)
    assert load_assignment_key(None) == DEV_KEY


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
    import vgpu.daemons.extender_cli as extender_cli
    import vgpu.daemons.node_cli as node_cli

    assert node_cli.load_assignment_key is load_assignment_key
    assert extender_cli.load_assignment_key is load_assignment_key
