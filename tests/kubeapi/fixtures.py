"""pytest fixtures for the fake API server.

Use them from a `conftest.py` with `from tests.kubeapi.fixtures import kube_server, kube_client`
(or list `"tests.kubeapi.fixtures"` in the root conftest's `pytest_plugins`).

- `kube_server`: a started `FakeApiServer`, stopped after the test.
- `kube_client`: a `kubernetes.client.ApiClient` for `kube_server` (host http://127.0.0.1:PORT,
  no auth), closed after the test.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.kubeapi.server import FakeApiServer


@pytest.fixture
def kube_server() -> Iterator[FakeApiServer]:
    with FakeApiServer() as server:
        yield server


@pytest.fixture
def kube_client(kube_server: FakeApiServer) -> Iterator[Any]:
    api_client = kube_server.api_client()
    try:
        yield api_client
    finally:
        api_client.close()
