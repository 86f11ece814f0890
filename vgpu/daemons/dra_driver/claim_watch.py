"""One watch of every ResourceClaim for the driver's parts that follow claims: the slice's
fullest-first order (`vgpu.daemons.dra_driver.slices`) and the limits of pods joining prepared
claims (`vgpu.daemons.dra_driver.joiners`). Each node's driver watches all claims of the
cluster (a claim's node is not a field the API server can select on), so one stream serves both.

A broken watch never takes the driver down: it is logged and started again after `retry_s`,
from a full list (`vgpu.adapters.kube.reflector`), and each follower is told first.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import Protocol

from vgpu.adapters.kube.dra_calls import DraKubeApi
from vgpu.adapters.kube.reflector import WatchEvent

log = logging.getLogger(__name__)


class ClaimFollower(Protocol):
    def claim_event(self, event: WatchEvent) -> None:
        """One change (ADDED, MODIFIED, DELETED) or SYNCED after a full list."""

    def watch_restarted(self) -> None:
        """A new stream begins with a full list."""


def follow_claims(
    kube: DraKubeApi,
    followers: Sequence[ClaimFollower],
    stop: threading.Event,
    retry_s: float,
) -> None:
    """Deliver every claim event to each follower until `stop` (module doc)."""
    while not stop.is_set():
        for follower in followers:
            follower.watch_restarted()
        try:
            for event in kube.watch_resource_claims(stop=stop):
                if stop.is_set():
                    return
                for follower in followers:
                    follower.claim_event(event)
        except Exception as e:  # a broken watch must never take the driver down
            log.warning("claim watch failed, restarting: %s", e)
            stop.wait(retry_s)
