"""The checkpoint of prepared claims: round trip, and an unreadable file set aside."""

from __future__ import annotations

from pathlib import Path

from vgpu.adapters.dra_checkpoint import Checkpoint
from vgpu.dra.checkpoint import decode_checkpoint, encode_checkpoint
from vgpu.dra.prepare import PreparedClaim, PreparedDevice

CLAIM = PreparedClaim(
    "uid-1",
    "ns",
    "c",
    (PreparedDevice("gpu", "n1", "gpu-0", "s-1", ("vgpu.io/claim=uid-1-gpu",)),),
    {"cdiVersion": "0.6.0", "kind": "vgpu.io/claim", "devices": []},
)


def test_round_trip_and_remove(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "checkpoint.json"
    cp = Checkpoint(path)
    cp.put(CLAIM)
    again = Checkpoint(path)
    assert again.get("uid-1") == CLAIM and len(again) == 1
    assert again.remove("uid-1") == CLAIM and again.remove("uid-1") is None
    assert len(Checkpoint(path)) == 0
    assert not path.with_suffix(".tmp").exists()


def test_unreadable_checkpoint_is_set_aside(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint.json"
    for text in ("{not json", '{"v": 9, "claims": {}}', '{"v": 1, "claims": {"u": {}}}'):
        path.write_text(text)
        assert len(Checkpoint(path)) == 0
        assert path.with_suffix(".corrupt").read_text() == text
        assert not path.exists()


def test_document_round_trips_without_a_file() -> None:
    other = PreparedClaim("uid-0", "ns", "d", (), {})
    text = encode_checkpoint([CLAIM, other])
    assert decode_checkpoint(text, "test") == {"uid-0": other, "uid-1": CLAIM}
    assert text == encode_checkpoint([other, CLAIM])  # the order given changes no byte
