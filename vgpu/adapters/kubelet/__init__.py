"""The kubelet's node-local interfaces, as the node agent uses them.

`device_plugin` (one device-plugin gRPC server per resource: ListAndWatch, and
GetPreferredAllocation and Allocate answered by an injected policy), `registration` (the plugins
kept registered across kubelet restarts), `node_plugins` (the cores and memory plugins of one node
over its GPUs, with the health pump), `pod_resources` (the pod-resources API: which device IDs
each running container holds) and `checkpoint` (the kubelet's device checkpoint file, read).
"""
