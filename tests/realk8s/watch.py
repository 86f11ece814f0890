"""Reading the API server's watch of pods: which stored changes of each pod the watchers see.

A status write counts only when it stored something: the API server writes nothing (and sends
no event) for an update that leaves the object as it was, so a watch sees exactly the writes
that re-queue pods in kube-scheduler and wake every other pod watcher.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import urllib3

from tests.realk8s.rest import Obj


@dataclass
class PodChanges:
    """MODIFIED events per pod name: those that changed `status`, and the others."""

    status: Counter[str] = field(default_factory=Counter)
    other: Counter[str] = field(default_factory=Counter)


def watch_pods(
    server: str, pki: Path, path: str, since: dict[str, Obj], resource_version: str, seconds: int
) -> PodChanges:
    """Watch `path` (a pod collection) from `resource_version` for `seconds` (the API server
    ends the watch), as admin; `since` is each watched pod as listed at that version."""
    pool = urllib3.PoolManager(
        ca_certs=str(pki / "ca.crt"),
        cert_reqs="CERT_REQUIRED",
        cert_file=str(pki / "admin.crt"),
        key_file=str(pki / "admin.key"),
        timeout=urllib3.Timeout(connect=10, read=seconds + 30),
        retries=False,
    )
    query = f"?watch=1&resourceVersion={resource_version}&timeoutSeconds={seconds}"
    reply = pool.request("GET", server + path + query, preload_content=False)
    assert reply.status == 200, f"watch {path}: {reply.status}"
    last = {name: pod.get("status") for name, pod in since.items()}
    changes = PodChanges()
    buffered = b""
    for chunk in reply.stream(65536):
        buffered += chunk
        *lines, buffered = buffered.split(b"\n")
        for line in filter(None, lines):
            event = json.loads(line)
            pod = event["object"]
            name = pod.get("metadata", {}).get("name", "")
            if event["type"] != "MODIFIED" or name not in last:
                continue
            changed = pod.get("status") != last[name]
            (changes.status if changed else changes.other)[name] += 1
            last[name] = pod.get("status")
    reply.release_conn()
    pool.clear()
    return changes
