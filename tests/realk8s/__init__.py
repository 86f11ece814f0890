"""The `realk8s` tier: tests against real kube-apiserver, kube-scheduler and kubelets."""
