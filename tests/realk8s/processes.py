"""Starting, stopping and waiting for the test cluster's processes.

Each process runs in its own session (so `hack/testcluster.sh up` can return and leave the cluster
running) and logs to LOGDIR/NAME.log; their ids are kept in pids.json beside the logs so that
`down` (from another process) ends exactly the processes `up` started, one by one.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tests.waiting import poll


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until(
    check: Callable[[], Any],
    timeout: float,
    what: str,
    watch: tuple[Path, Callable[[], bool]] | None = None,
    reraise: type[Exception] | None = None,
) -> Any:
    """The tests' poll loop (`tests.waiting.poll`, every 0.2 s) with what a real process adds:
    exceptions from `check` count as not yet; it fails naming `what` after `timeout` seconds.
    `watch` is a component's (log, alive): the failure then shows the end of its log, and comes
    at once if the process ends. A `reraise` exception from `check` ends the wait at once."""
    last: list[Exception] = []
    ended: list[bool] = []

    def attempt() -> Any:
        if watch is not None and not watch[1]():
            ended.append(True)
            return True  # ends the poll; told apart from success below
        try:
            return check()
        except Exception as err:  # any other failure means "not yet"
            if reraise is not None and isinstance(err, reraise):
                raise
            last[:] = [err]
            return None

    value = poll(attempt, timeout, interval=0.2)
    if value and not ended:
        return value
    why = "its process ended" if ended else f"timed out after {timeout:.0f}s"
    tail = ""
    if watch is not None and watch[0].exists():
        lines = watch[0].read_text(errors="replace").splitlines()[-40:]
        tail = f"\n--- end of {watch[0].name} ---\n" + "\n".join(lines)
    raise TimeoutError(f"{why} waiting for {what} (last: {last[0] if last else None}){tail}")


class Processes:
    """The processes of one cluster directory, by component name."""

    def __init__(self, root: Path) -> None:
        self.logs = root / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self._file = root / "pids.json"
        self.children: dict[str, subprocess.Popen[bytes]] = {}

    def log(self, name: str) -> Path:
        return self.logs / f"{name}.log"

    def start(self, name: str, argv: Sequence[str], env: dict[str, str] | None = None) -> int:
        """Start `argv` as component `name` (stopping an earlier one of that name first)."""
        if name in self.children:
            self.stop(name)
        with self.log(name).open("ab") as out:
            out.write(f"=== start {time.strftime('%H:%M:%S')}: {' '.join(argv)}\n".encode())
            out.flush()
            child = subprocess.Popen(
                list(argv),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                env={**os.environ, **(env or {})},
            )
        self.children[name] = child
        self._save()
        return child.pid

    def alive(self, name: str) -> bool:
        child = self.children.get(name)
        return child is not None and child.poll() is None

    def stop(self, name: str, sig: int = signal.SIGTERM, grace: float = 10.0) -> None:
        """End component `name`'s process group: `sig`, then SIGKILL after `grace` seconds."""
        child = self.children.pop(name, None)
        if child is not None:
            _end_group(child.pid, sig, grace, child.poll)
            self._save()

    def stop_all(self) -> None:
        for name in reversed(list(self.children)):
            self.stop(name)

    def _save(self) -> None:
        self._file.write_text(json.dumps({n: c.pid for n, c in self.children.items()}))

    @staticmethod
    def stop_recorded(root: Path) -> list[str]:
        """`down` from another process: end every process recorded in ROOT/pids.json."""
        path = root / "pids.json"
        if not path.exists():
            return []
        pids: dict[str, int] = json.loads(path.read_text())
        for pid in reversed(list(pids.values())):
            _end_group(pid, signal.SIGTERM, 10.0, functools.partial(_gone, pid))
        path.unlink()
        return list(pids)


def _gone(pid: int) -> int | None:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return 0
    return None


def _end_group(pid: int, sig: int, grace: float, done: Callable[[], int | None]) -> None:
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if done() is not None:
            return
        time.sleep(0.1)
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    while done() is None and time.monotonic() < deadline + 5:
        time.sleep(0.05)
