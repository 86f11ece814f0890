"""The gangs the extender leader decided to release, on the leader Lease.

A gang is released by removing its members' gates one by one, so a leader may stop halfway. The
next leader must finish such a gang without deciding it again, and must not take a released
member as proof that the gang was decided: anyone who may create pods can reuse a released
gang's name, or annotate a held pod into it, and have the new members released with no fit, cap
or share check. So the leader records each gang it decides (gang -> its members' UIDs) and
carries the record on its Lease (`LeaderElector.carry`, beside the strict holds,
`vgpu.extender.queues.strict_holds`); it removes a gang's gates only once the Lease it last
wrote holds the gang, and the next leader finishes exactly the members the record names
(`vgpu.core.queues.jobs`).

The annotation is JSON, gang to a list of UIDs. Only vgpu's service account writes the Lease; a
value that cannot be read is logged and dropped: its gangs' held members then stay held (fail
closed) rather than being released on a guess.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import TypeGuard

log = logging.getLogger(__name__)

GANGS_ANNOTATION = "vgpu.io/released-gangs"


def encode(decided: Mapping[str, frozenset[str]]) -> str | None:
    """The annotation's value for this record (None: no gang, the annotation is removed)."""
    if not decided:
        return None
    return json.dumps({g: sorted(ids) for g, ids in sorted(decided.items())})


def decode(text: str | None) -> dict[str, frozenset[str]]:
    """The record an annotation carries; {} (logged) when it cannot be read (module doc)."""
    try:
        raw = json.loads(text) if text else {}
    except ValueError:
        raw = None
    if not isinstance(raw, dict):
        log.warning(
            "lease annotation %s is not a JSON object; its gangs stay held", GANGS_ANNOTATION
        )
        return {}
    record = {str(g): frozenset(ids) for g, ids in raw.items() if _uids(ids)}
    for gang in sorted(str(g) for g in raw if str(g) not in record):
        log.warning(
            "lease annotation %s: gang %s has no UID list; it stays held", GANGS_ANNOTATION, gang
        )
    return record


def _uids(value: object) -> TypeGuard[list[str]]:
    return isinstance(value, list) and all(isinstance(i, str) for i in value)
