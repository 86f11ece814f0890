"""Fixtures shared with the extender's tests (a fake API server and an extender harness), and
quiet vgpu logs for the modules that ask for them (`QUIET_LOGS = True`)."""

import logging
from collections.abc import Iterator

import pytest

from tests.extender.conftest import harness
from tests.kubeapi.fixtures import kube_client, kube_server

__all__ = ["harness", "kube_client", "kube_server"]


@pytest.fixture(autouse=True)
def _quiet_logs(request: pytest.FixtureRequest) -> Iterator[None]:
    """Raise the `vgpu` logger to ERROR for one test of a quiet module, and restore it after:
    set at import time instead, it silenced every later test that reads the logs."""
    if not getattr(request.module, "QUIET_LOGS", False):
        yield
        return
    logger = logging.getLogger("vgpu")
    before = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(before)
