{{- /*
Whether the policy vgpu-scheduler-name is rendered ("true" or ""), and the CEL of the pods it
takes: those naming no scheduler (or the default one, which the API server's defaulting sets
before admission) and asking a vGPU resource. The queue gate takes the same pods itself, so a
pod is held whichever of the two policies the API server runs first (a reinvocation alone did
not always gate it on the test cluster).
*/ -}}
{{- define "vgpu.setsSchedulerName" -}}
{{- if and .Values.admissionPolicy.enabled .Values.admissionPolicy.setSchedulerName (semverCompare ">=1.36.0-0" .Capabilities.KubeVersion.Version) }}true{{ end }}
{{- end }}

{{- define "vgpu.namesNoOtherSchedulerCel" -}}
!has(object.spec.schedulerName) || object.spec.schedulerName == '' || object.spec.schedulerName == 'default-scheduler'
{{- end }}

{{- define "vgpu.asksVgpuCel" -}}
(object.spec.containers + (has(object.spec.initContainers) ? object.spec.initContainers : [])).exists(c, has(c.resources) && ((has(c.resources.limits) && c.resources.limits.exists(k, k.startsWith('{{ .Values.resourceDomain }}/'))) || (has(c.resources.requests) && c.resources.requests.exists(k, k.startsWith('{{ .Values.resourceDomain }}/')))))
{{- end }}
