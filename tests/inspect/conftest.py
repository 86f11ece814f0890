from tests.kubeapi.fixtures import kube_client, kube_server

__all__ = ["kube_client", "kube_server"]
