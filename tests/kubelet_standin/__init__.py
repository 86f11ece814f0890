"""Kubelet stand-ins speaking the real kubelet protos over real unix sockets (test support)."""
