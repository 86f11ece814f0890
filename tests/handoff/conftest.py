"""Fixtures shared with the extender's tests (a fake API server and an extender harness)."""

from tests.extender.conftest import harness
from tests.kubeapi.fixtures import kube_client, kube_server

__all__ = ["harness", "kube_client", "kube_server"]
