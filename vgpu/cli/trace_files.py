"""The simulator's files: the trace's CSVs (given or embedded) read for `vgpu.sim`, and their
records for `--json`.

`vgpu.sim` parses text and holds no file I/O; `vgpu simulate` (and the benches and tests that
replay a trace) read the files here. A file that cannot be read is one `TraceError` line naming
it, as a malformed one is.
"""

from __future__ import annotations

import hashlib
from importlib import resources
from pathlib import Path

from vgpu.sim.poisson import parse_lifetimes
from vgpu.sim.trace import DEFAULT_NODES, DEFAULT_PODS, Trace, TraceError, TraceText, parse_trace


def embedded(name: str) -> Path:
    """Path of a file of the embedded default trace."""
    return Path(str(resources.files("vgpu.sim") / "data" / name))


def read_text(path: Path) -> TraceText:
    """A trace file's text, cited by its path; raises `TraceError` when it cannot be read."""
    try:
        return TraceText(str(path), path.read_text(encoding="utf-8"))
    except OSError as err:
        raise TraceError(f"{path}: cannot open ({err.strerror})") from err
    except UnicodeDecodeError as err:
        raise TraceError(f"{path}: not UTF-8 text ({err.reason} at byte {err.start})") from err


def read_trace(nodes_csv: Path | None = None, pods_csv: Path | None = None) -> Trace:
    """Read a trace; missing paths mean the embedded default (openb)."""
    nodes = read_text(nodes_csv or embedded(DEFAULT_NODES))
    return parse_trace(nodes, read_text(pods_csv or embedded(DEFAULT_PODS)))


def read_lifetimes(pods_csv: Path | None = None) -> dict[str, float]:
    """Each trace pod's lifetime in seconds (`--queues`); no path means the embedded pods."""
    return parse_lifetimes(read_text(pods_csv or embedded(DEFAULT_PODS)))


def sha256(path: Path) -> str:
    """The file's sha256 in hex, read in chunks (a pod list runs to megabytes)."""
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def trace_file(given: Path | None, default: str) -> dict[str, object]:
    """One trace file's record in `--json`'s inputs: the path as given (or the embedded file's
    name), and its sha256. The embedded file is named, not located: its place on disk depends
    on the install."""
    path = given if given is not None else embedded(default)
    return {
        "file": str(given) if given is not None else default,
        "embedded": given is None,
        "sha256": sha256(path),
    }


def trace_files(nodes: Path | None, pods: Path | None) -> dict[str, dict[str, object]]:
    """Both files' records, as `run_inputs` takes them."""
    return {"nodes": trace_file(nodes, DEFAULT_NODES), "pods": trace_file(pods, DEFAULT_PODS)}
