"""A fake Kubernetes API server over real HTTP for tests (see `server.FakeApiServer`)."""

from tests.kubeapi.resources import ApiError, Resource
from tests.kubeapi.server import FakeApiServer, Fault, RecordedRequest
from tests.kubeapi.store import Store

__all__ = ["ApiError", "FakeApiServer", "Fault", "RecordedRequest", "Resource", "Store"]
