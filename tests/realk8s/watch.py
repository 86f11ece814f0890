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
    """MODIFIED events per pod name: those that changed `status`, and the others; `fields`
    names what the status writes changed (`status.<key>`, `<container>.<key>`)."""

    status: Counter[str] = field(default_factory=Counter)
    other: Counter[str] = field(default_factory=Counter)
    fields: set[str] = field(default_factory=set)


def changed_fields(old: Obj, new: Obj) -> set[str]:
    """The status keys, and each container status's keys, that differ between two statuses."""
    found = {f"status.{k}" for k in old.keys() | new.keys() if old.get(k) != new.get(k)}
    before = {c.get("name"): c for c in old.get("containerStatuses") or []}
    for container in new.get("containerStatuses") or []:
        was = before.get(container.get("name"), {})
        found |= {
            f"{container.get('name')}.{k}"
            for k in was.keys() | container.keys()
            if was.get(k) != container.get(k)
        }
    return found


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
            if changed:
                changes.fields |= changed_fields(last[name] or {}, pod.get("status") or {})
            last[name] = pod.get("status")
    reply.release_conn()
    pool.clear()
    return changes
