"""Reading the kubelet's device checkpoint file for the node agent (its format and what it
means are `vgpu.node.checkpoint`'s).

The kubelet writes `kubelet_internal_checkpoint` only at an Allocate or a ListAndWatch update, so
a missing file is no problem, only nothing to judge from; an unreadable, oversized or malformed
one is a named problem, never an exception: the agent's loop goes on.
"""

from __future__ import annotations

from pathlib import Path

from vgpu.node.checkpoint import (
    MAX_CHECKPOINT_BYTES,
    CheckpointError,
    CheckpointRead,
    parse_checkpoint,
)


def checkpoint_text(path: Path) -> str | None:
    """The checkpoint's text, read with the same bound; None when it is missing, unreadable or
    larger than any kubelet writes (then nothing can be judged from it)."""
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_CHECKPOINT_BYTES + 1)
    except OSError:
        return None
    if len(raw) > MAX_CHECKPOINT_BYTES:
        return None
    return raw.decode("utf-8", errors="replace")


def read_checkpoint(path: Path) -> CheckpointRead:
    """The checkpoint's entries; a missing file is not read (no problem: a kubelet writes it at
    the first device-plugin update); an unreadable one is a named problem."""
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_CHECKPOINT_BYTES + 1)
    except FileNotFoundError:
        return CheckpointRead(None)
    except OSError as e:
        return CheckpointRead(
            None, f"{path}: cannot read the kubelet's device checkpoint ({e.strerror})"
        )
    if len(raw) > MAX_CHECKPOINT_BYTES:
        return CheckpointRead(None, f"{path}: larger than {MAX_CHECKPOINT_BYTES} bytes, not read")
    try:
        return CheckpointRead(parse_checkpoint(raw.decode("utf-8", errors="replace")))
    except CheckpointError as e:
        return CheckpointRead(None, f"{path}: {e}")
