"""Issue one Kubernetes API request through the official client's request layer.

`KubeApi` needs a dozen endpoints and always takes the raw reply (`_preload_content=False`), so
the generated `CoreV1Api` / `CustomObjectsApi` classes add nothing but their import: importing
`kubernetes.client.api.core_v1_api` executes a 4 MB module and, through its annotations, ~250
pydantic model modules (~21 MiB resident, a third of the node agent's 60 MiB budget).

`Requester.send` does what those generated methods do with `_preload_content=False`, with the
same client objects: `ApiClient.param_serialize` (configured host, default headers, BearerToken
auth, path-parameter quoting, query encoding), `ApiClient.call_api` (the client's REST layer:
TLS, proxies, retries, timeouts) and, for a status outside 2xx, the client's own
`ApiException.from_response`. Query names are the wire names (`labelSelector`, `continue`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubernetes.client.exceptions import ApiException

JSON = "application/json"


class Requester:
    """Sends requests with an official `kubernetes.client.ApiClient`; replies stay unread."""

    def __init__(self, api_client: Any) -> None:
        self.api_client = api_client

    def send(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        query: Mapping[str, object] | None = None,
        body: object = None,
        content_type: str | None = None,
        timeout: object = None,
    ) -> Any:
        """The urllib3 response to `method path` (a template: `{name}` filled from `params`,
        quoted); query entries that are None are left out. Non-2xx → `ApiException`."""
        headers = {"Accept": JSON}
        if content_type:
            headers["Content-Type"] = content_type
        request = self.api_client.param_serialize(
            method=method,
            resource_path=path,
            path_params=dict(params or {}),
            query_params=[(k, v) for k, v in (query or {}).items() if v is not None],
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        reply = self.api_client.call_api(*request, _request_timeout=timeout)
        if not 200 <= reply.status <= 299:
            reply.read()
            raise ApiException.from_response(http_resp=reply, body=None, data=None)
        return reply.response
