// Command testcluster runs the real Kubernetes components of the vgpu test cluster from one binary,
// so the packages they share compile once: `testcluster <component> [flags]`.
package main

import (
	"context"
	"fmt"
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	kubelet "k8s.io/kubernetes/cmd/kubelet/app"
)

const usage = "usage: testcluster {etcd|kube-apiserver|kube-controller-manager|kube-scheduler|kubelet|fake-cri|certs} [flags]"

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	name, args := os.Args[1], os.Args[2:]
	os.Args = append([]string{name}, args...)
	switch name {
	case "kube-apiserver":
		os.Exit(cli.Run(apiserver.NewAPIServerCommand()))
	case "kube-controller-manager":
		os.Exit(cli.Run(controllermanager.NewControllerManagerCommand()))
	case "kube-scheduler":
		os.Exit(cli.Run(scheduler.NewSchedulerCommand()))
	case "kubelet":
		os.Exit(cli.Run(kubelet.NewKubeletCommand(context.Background())))
	case "etcd":
		os.Exit(runEtcd(args))
	case "fake-cri":
		os.Exit(runFakeCRI(args))
	case "certs":
		os.Exit(runCerts(args))
	default:
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
}
