{{/* Names and labels shared by every object of the chart. */}}

{{- define "turnout.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "turnout.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "turnout.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "turnout.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: turnout
{{- end -}}

{{/* Selector labels of one component: (dict "root" $ "component" "ingress") */}}
{{- define "turnout.selectorLabels" -}}
app.kubernetes.io/name: {{ include "turnout.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "turnout.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "turnout.secretName" -}}
{{- .Values.secret.existingSecret | default (include "turnout.fullname" .) -}}
{{- end -}}

{{- define "turnout.redisName" -}}
{{- printf "%s-redis" (include "turnout.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* TURNOUT_REDIS_URL: the in-chart Redis, a key of a Secret, or redis.url. */}}
{{- define "turnout.redisUrlEnv" -}}
- name: TURNOUT_REDIS_URL
{{- if .Values.redis.internal.enabled }}
  value: {{ printf "redis://%s:6379/0" (include "turnout.redisName" .) | quote }}
{{- else if .Values.redis.urlSecret.name }}
  valueFrom:
    secretKeyRef: {name: {{ .Values.redis.urlSecret.name }}, key: {{ required "redis.urlSecret.key is required with redis.urlSecret.name" .Values.redis.urlSecret.key }}}
{{- else }}
  value: {{ required "redis.url is required (or redis.internal.enabled: true)" .Values.redis.url | quote }}
{{- end }}
{{- end -}}

{{/* Environment of the ingress and worker containers: (dict "root" $ "component" "worker") */}}
{{- define "turnout.env" -}}
{{- $v := .root.Values -}}
- name: TURNOUT_CONFIG
  value: /etc/turnout/turnout.yaml
{{ include "turnout.redisUrlEnv" .root }}
{{- if $v.otel.enabled }}
- name: OTEL_TRACES_EXPORTER
  value: otlp
- name: OTEL_EXPORTER_OTLP_PROTOCOL
  value: {{ $v.otel.protocol | quote }}
- name: OTEL_EXPORTER_OTLP_ENDPOINT
  value: {{ $v.otel.endpoint | quote }}
- name: OTEL_SERVICE_NAME
  value: {{ printf "%s-%s" $v.otel.serviceNamePrefix .component | quote }}
{{- end }}
{{- with $v.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Pod-level fields shared by the ingress and the worker: (dict "root" $ "values" .Values.worker) */}}
{{- define "turnout.podCommon" -}}
{{- with .root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml .root.Values.podSecurityContext | nindent 2 }}
{{- with .values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
volumes:
  - name: config
    configMap: {name: {{ include "turnout.fullname" .root }}}
  - name: tmp
    emptyDir: {}
{{- end -}}

{{/* Pod template annotations: a config or secret change rolls the pods. */}}
{{- define "turnout.podAnnotations" -}}
checksum/config: {{ include (print .root.Template.BasePath "/configmap.yaml") .root | sha256sum }}
{{- if not .root.Values.secret.existingSecret }}
checksum/secret-values: {{ toJson .root.Values.secret | sha256sum }}
{{- end }}
{{- with .annotations }}
{{ toYaml . }}
{{- end }}
{{- end -}}
