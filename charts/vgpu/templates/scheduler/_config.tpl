{{- define "vgpu.schedulerConfig" -}}
{{- $s := .root.Values.scheduler -}}
{{- $tls := .root.Values.extender.tls -}}
# KubeSchedulerConfiguration (v1) of {{ $s.name }}, the second kube-scheduler that places pods
# with `schedulerName: {{ $s.name }}` and calls the vgpu extender.
{{- if eq .profile "all" }}
#
# managedResources is deliberately EMPTY: kube-scheduler then calls the extender for every pod of
# this profile (an extender with no managed resources is interested in all pods). That is how
# CPU-only members of a gang (a TFJob parameter server) reach the extender and are planned
# all-or-nothing with the GPU workers. Pods that ask no vGPU and are in no gang pass filter
# unchanged and score 0. scheduler-config-gpu-only.yaml limits the extender to vGPU pods instead.
{{- else }}
#
# Variant: the extender only sees pods that ask vgpu.io/cores or vgpu.io/memory in a container's
# or init container's requests/limits. Lighter on clusters with many CPU-only pods, but CPU-only
# gang members then never reach the extender, so gangs must consist of GPU pods only.
# ignoredByScheduler stays false: the node agent advertises both resources as device counts, so
# NodeResourcesFit's count check is correct and cheap.
{{- end }}
#
# ignorable: false: if the extender is unreachable, pods are not placed without it (their GPUs could
# not be admitted without a signed assignment). httpTimeout stays above the extender's gang bind
# wait (--bind-wait). The profile binpacks CPU and memory (NodeResourcesFit MostAllocated)
# so whole nodes stay free for large pods, as the extender binpacks GPUs.
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: true
  resourceNamespace: {{ include "vgpu.namespace" .root }}
  resourceName: vgpu-scheduler
{{- with $s.percentageOfNodesToScore }}
percentageOfNodesToScore: {{ . }}
{{- end }}
profiles:
  - schedulerName: {{ $s.name }}
    pluginConfig:
      - name: NodeResourcesFit
        args:
          scoringStrategy:
            type: MostAllocated
            resources:
              - name: cpu
                weight: 1
              - name: memory
                weight: 1
extenders:
  - urlPrefix: {{ include "vgpu.extenderURL" .root | quote }}
    filterVerb: filter
    {{- if .root.Values.extender.filterBest }}
    # No prioritizeVerb: the extender's filter passes only the nodes its policy scores best
    # (--filter-best {{ .root.Values.extender.filterBest }}), so kube-scheduler's own scoring chooses among equals and
    # a pod costs one call to the extender, not two (docs/operations.md, "Scheduling speed").
    {{- else }}
    prioritizeVerb: prioritize
    weight: 5
    {{- end }}
    preemptVerb: preempt
    bindVerb: bind
    nodeCacheCapable: true
    enableHTTPS: {{ $tls.enabled }}
    {{- if $tls.enabled }}
    tlsConfig:  # the Secret {{ $tls.clientSecretName }} (the chart or hack/make-extender-certs.sh)
      certFile: /etc/vgpu-extender-client/tls.crt
      keyFile: /etc/vgpu-extender-client/tls.key
      caFile: /etc/vgpu-extender-client/ca.crt
    {{- end }}
    httpTimeout: {{ $s.extenderTimeout }}
    ignorable: false
    {{- if eq .profile "all" }}
    managedResources: []
    {{- else }}
    managedResources:
      - name: {{ .root.Values.resourceDomain }}/cores
        ignoredByScheduler: false
      - name: {{ .root.Values.resourceDomain }}/memory
        ignoredByScheduler: false
    {{- end }}
{{- end -}}
