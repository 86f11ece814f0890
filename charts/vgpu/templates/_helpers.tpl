{{/* The namespace of every namespaced object. */}}
{{- define "vgpu.namespace" -}}
{{- .Values.namespace.name | default .Release.Namespace -}}
{{- end -}}

{{/* Labels of every object; "component" is passed as .component. */}}
{{- define "vgpu.labels" -}}
app.kubernetes.io/name: vgpu
{{- with .component }}
app.kubernetes.io/component: {{ . }}
{{- end }}
app.kubernetes.io/part-of: vgpu
{{- if .root.Values.helmLabels }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version }}
{{- end }}
{{- end -}}

{{/* Selector labels: stable across upgrades (never the chart version). */}}
{{- define "vgpu.selector" -}}
app.kubernetes.io/name: vgpu
app.kubernetes.io/component: {{ . }}
{{- end -}}

{{/* The vgpu image. */}}
{{- define "vgpu.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}

{{/*
kube-scheduler's image: the tag given, else the cluster's vMAJOR.MINOR.PATCH without a vendor's
suffix (v1.31.4-eks-..., v1.31.4-gke.100, v1.31.4+k3s1 all give v1.31.4, which
registry.k8s.io publishes).
*/}}
{{- define "vgpu.schedulerImage" -}}
{{- printf "%s:%s" .Values.scheduler.image.repository (include "vgpu.schedulerVersion" .) -}}
{{- end -}}

{{/*
kube-scheduler's version: its image tag, as above. Flags newer than the oldest supported
Kubernetes (feature gates) are rendered only for the versions that know them; a tag that is not
a version (a digest, "latest") is taken as new.
*/}}
{{- define "vgpu.schedulerVersion" -}}
{{- $cluster := regexFind "^v[0-9]+[.][0-9]+[.][0-9]+" .Capabilities.KubeVersion.Version -}}
{{- /* v1.20.0: `helm template` without --kube-version, no cluster: daemonset/'s tag. */ -}}
{{- .Values.scheduler.image.tag | default (ternary "v1.31.4" $cluster (eq $cluster "v1.20.0")) -}}
{{- end -}}

{{/* The name of the Secret holding the assignment key. */}}
{{- define "vgpu.keySecret" -}}
{{- .Values.assignmentKey.existingSecret | default .Values.assignmentKey.name -}}
{{- end -}}

{{/* The service account a component runs as, in the form the API server names users. */}}
{{- define "vgpu.user" -}}
{{- printf "system:serviceaccount:%s:%s" (include "vgpu.namespace" .root) .account -}}
{{- end -}}

{{/* The extender's URL as kube-scheduler calls it. */}}
{{- define "vgpu.extenderURL" -}}
{{- printf "%s://vgpu-extender.%s.svc:%d/scheduler" (ternary "https" "http" .Values.extender.tls.enabled) (include "vgpu.namespace" .) (ternary 443 80 .Values.extender.tls.enabled | int) -}}
{{- end -}}

{{/* Pod annotations asking Prometheus (annotation discovery) to scrape port .port. */}}
{{- define "vgpu.scrapeAnnotations" -}}
{{- if .root.Values.metrics.scrapeAnnotations }}
prometheus.io/scrape: "true"
prometheus.io/port: {{ .port | quote }}
prometheus.io/path: /metrics
{{- if .https }}
prometheus.io/scheme: https
{{- end }}
{{- end }}
{{- end -}}

{{/* The driver memory backend (docs/isolation.md, "Driver memory limits") in a daemon's pod,
given its `driverMemoryLimits` values: the flags, the host's cgroup tree and the capability.
Off: none of them. */}}
{{- define "vgpu.driverLimitArgs" -}}
- --driver-memory-limits={{ .mode }}
{{- if ne .mode "off" }}
- --cgroupfs={{ .cgroupfs }}
{{- if .softLimits }}
- --driver-soft-limits
{{- end }}
{{- end }}
{{- end }}

{{- define "vgpu.driverLimitMount" -}}
{{- if ne .mode "off" -}}
# The host's cgroup v2 tree at the host's path, read-only: the daemon reads
# cgroup.controllers, dmem.capacity and which pod cgroups exist, and names a pod's
# cgroup to NVML by the host's path (the driver sets the limit; nothing is written here).
- name: host-cgroup
  mountPath: {{ .cgroupfs }}
  readOnly: true
{{- end }}
{{- end }}

{{- define "vgpu.driverLimitVolume" -}}
{{- if ne .mode "off" -}}
- name: host-cgroup
  hostPath:
    path: {{ .cgroupfs }}
    type: Directory
{{- end }}
{{- end }}

{{/* The capabilities a node daemon adds to none: SYS_ADMIN where the driver may set memory
limits (NVML: "Requires root/admin permissions"; the driver's administrator test is
capable(CAP_SYS_ADMIN), open-gpu-kernel-modules kernel-open/common/inc/nv-linux.h, NV_IS_SUSER),
KILL for the agent's watchdog kill. Given (dict "limits" driverMemoryLimits "kill" bool). */}}
{{- define "vgpu.nodeCapabilities" -}}
{{- $add := list }}
{{- if .kill }}{{ $add = append $add "KILL" }}{{ end }}
{{- if ne .limits.mode "off" }}{{ $add = append $add "SYS_ADMIN" }}{{ end -}}
drop: ["ALL"]
{{- with $add }}
add: {{ toJson . }}
{{- end }}
{{- end }}

{{/*
The init container that puts a daemon's container directories on a tmpfs of
nodeAgent.containerDirs.size: a hard bound on what containers write there (docs/isolation.md).
Privileged, for the one reason that a mount made in it must reach the host (Bidirectional
propagation needs it), so that the runtime mounts the containers' files from the tmpfs. A
directory that is already a mount point is kept; a non-empty one (containers use it) is left
alone, so the bound stays periodic until it is empty at a later start.
Arguments: root (the chart's top context), stateDir (the daemon's state directory, mounted
at the same path), dir (the directory under it), volume (the state volume's name).
*/}}
{{- define "vgpu.containerDirsMount" -}}
- name: container-dirs-tmpfs
  image: {{ include "vgpu.image" .root }}
  imagePullPolicy: {{ .root.Values.image.pullPolicy }}
  command:
    - /bin/sh
    - -c
    - |
      set -eu
      dir="$1"; size="$2"
      mkdir -p "$dir"
      if mountpoint -q "$dir"; then
        echo "$dir: already a mount point, kept"; exit 0
      fi
      if [ -n "$(ls -A "$dir")" ]; then
        echo "$dir: not empty (containers use it), left as is: the bound stays periodic"; exit 0
      fi
      mount -t tmpfs -o "size=$size,mode=0755" vgpu-container-dirs "$dir"
      echo "$dir: a tmpfs of size=$size mounted"
    - container-dirs-tmpfs
    - {{ .dir }}
    - {{ .root.Values.nodeAgent.containerDirs.size | quote }}
  securityContext:
    privileged: true
    runAsUser: 0
    runAsGroup: 0
  volumeMounts:
    - name: {{ .volume }}
      mountPath: {{ .stateDir }}
      mountPropagation: Bidirectional
{{- end }}

{{/*
A node daemon's privilege: with nodeAgent.containerDirs.perContainerTmpfs it mounts a tmpfs over
each container directory in the host's mount namespace, which Bidirectional propagation on its
state directory needs and Kubernetes allows only to a privileged container; else none.
Argument: whether it mounts.
*/}}
{{- define "vgpu.dirMountPrivilege" -}}
{{- if . -}}
privileged: true
{{- else -}}
allowPrivilegeEscalation: false
{{- end }}
{{- end }}
