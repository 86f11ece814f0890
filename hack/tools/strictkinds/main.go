// Command strictkinds decodes, strictly, the objects kubernetes-validate has no schema for: the
// Prometheus Operator's ServiceMonitor, PodMonitor and PrometheusRule (into the operator's own Go
// types) and KubeSchedulerConfiguration v1 (into kube-scheduler's), whether a file holds it or a
// ConfigMap carries it. An unknown field or a wrong type is an error, as the API server's strict
// field validation and kube-scheduler's config loader make it (field names match without regard
// to case here, as Go's JSON decoder matches them). Usage: strictkinds FILE...; one line per
// problem; exit status 1 when there is any.
package main

import (
	"bytes"
	"fmt"
	"os"
	"strings"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	schedulerv1 "k8s.io/kube-scheduler/config/v1"
	"sigs.k8s.io/yaml"
)

type header struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Data       map[string]string `json:"data"`
}

func target(apiVersion, kind string) any {
	switch apiVersion + " " + kind {
	case "monitoring.coreos.com/v1 ServiceMonitor":
		return &monitoringv1.ServiceMonitor{}
	case "monitoring.coreos.com/v1 PodMonitor":
		return &monitoringv1.PodMonitor{}
	case "monitoring.coreos.com/v1 PrometheusRule":
		return &monitoringv1.PrometheusRule{}
	case "kubescheduler.config.k8s.io/v1 KubeSchedulerConfiguration":
		return &schedulerv1.KubeSchedulerConfiguration{}
	}
	return nil
}

// check decodes one document; it returns how many it checked and the problems found.
func check(where string, doc []byte) (int, []string) {
	var h header
	if err := yaml.Unmarshal(doc, &h); err != nil || h.Kind == "" {
		return 0, nil // not an object; kubernetes-validate reports those
	}
	if h.APIVersion == "v1" && h.Kind == "ConfigMap" {
		n, problems := 0, []string(nil)
		for key, value := range h.Data {
			if strings.HasSuffix(key, ".yaml") {
				k, p := check(where+" data."+key, []byte(value))
				n, problems = n+k, append(problems, p...)
			}
		}
		return n, problems
	}
	into := target(h.APIVersion, h.Kind)
	if into == nil {
		return 0, nil
	}
	if err := yaml.UnmarshalStrict(doc, into); err != nil {
		return 1, []string{fmt.Sprintf("%s: %s: %v", where, h.Kind, err)}
	}
	return 1, nil
}

func main() {
	checked, problems := 0, []string(nil)
	for _, path := range os.Args[1:] {
		text, err := os.ReadFile(path)
		if err != nil {
			fmt.Println(err)
			os.Exit(2)
		}
		for _, doc := range bytes.Split(append([]byte("\n"), text...), []byte("\n---")) {
			n, p := check(path, doc)
			checked, problems = checked+n, append(problems, p...)
		}
	}
	for _, p := range problems {
		fmt.Println(p)
	}
	fmt.Printf("strictkinds: %d objects decoded strictly, %d problems\n", checked, len(problems))
	if len(problems) > 0 {
		os.Exit(1)
	}
}
