// A stand-in for sigs.k8s.io/iptables-wrappers, which Kubernetes 1.38's kubelet imports and which
// the Go module proxy this project builds from does not serve (403). The test cluster's kubelet
// has no iptables to manage (its pods run on a fake container runtime), so the stand-in reports a
// host without iptables, a case the kubelet handles: it logs it and skips its hint chains
// (pkg/kubelet/kubelet_network_linux.go, initNetworkUtil). v1.38.mod points the module here.
module sigs.k8s.io/iptables-wrappers

go 1.26
