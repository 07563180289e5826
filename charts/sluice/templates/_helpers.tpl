{{/* Chart name. */}}
{{- define "sluice.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Prefix of every object name: the release name when it contains the chart name. */}}
{{- define "sluice.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "sluice.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "sluice.controllerName" -}}{{ include "sluice.fullname" . }}-controller{{- end -}}
{{- define "sluice.webhookName" -}}{{ include "sluice.fullname" . }}-webhook{{- end -}}
{{- define "sluice.webhookSecretName" -}}{{ include "sluice.fullname" . }}-webhook-tls{{- end -}}
{{- define "sluice.webhookConfigurationName" -}}{{ include "sluice.fullname" . }}{{- end -}}

{{- define "sluice.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "sluice.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Selector labels of one component: (dict "ctx" $ "component" "controller"). */}}
{{- define "sluice.selectorLabels" -}}
app.kubernetes.io/name: {{ include "sluice.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "sluice.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end -}}

{{/* Namespaces the webhook never sees: the configured ones plus the release namespace (as `sluice webhook manifests`). */}}
{{- define "sluice.excludedNamespaces" -}}
{{- $ns := .Values.webhook.config.excludedNamespaces | default list -}}
{{- if not (has .Release.Namespace $ns) -}}
{{- $ns = append $ns .Release.Namespace -}}
{{- end -}}
{{- toJson $ns -}}
{{- end -}}

{{/* Hardened pod and container security contexts. */}}
{{- define "sluice.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "sluice.containerSecurityContext" -}}
runAsNonRoot: true
readOnlyRootFilesystem: true
allowPrivilegeEscalation: false
privileged: false
capabilities:
  drop: [ALL]
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* The webhook configuration file. */}}
{{- define "sluice.webhookConfig" -}}
{{- $c := deepCopy .Values.webhook.config -}}
{{- /* Helm drops keys set to null; the webhook reads `nodeAffinity: null` as "off". */ -}}
{{- if and (hasKey $c "gpu") (not (hasKey $c.gpu "nodeAffinity")) -}}
{{- $_ := set $c.gpu "nodeAffinity" nil -}}
{{- end -}}
{{- $_ := set $c "kueueCompat" .Values.kueueCompat -}}
{{- $_ := set $c "controllerServiceAccount" (include "sluice.controllerName" .) -}}
{{- toYaml $c -}}
{{- end -}}
