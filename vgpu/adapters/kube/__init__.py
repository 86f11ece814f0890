"""The Kubernetes API edge: every call vgpu makes to the API server, as plain dicts in wire form.

`calls` (`KubeApi`: the list of calls), `bodies` (their paths and request bodies), `dra_calls`
(the `resource.k8s.io/v1` calls of the DRA driver), `plumbing` (one request, a paged list, a
watch), `reflector` (list-then-watch with resume and relist), `request` (one request through the
official client's request layer), `fast_post` (the extender's lean POST for the Binding),
`credentials` (kubeconfig, in-cluster or default), `errors` (the client's errors as vgpu's) and
`client_import` (the official client imported without its packages' eager bodies).
"""
