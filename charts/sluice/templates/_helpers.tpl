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

{{/*
Labels of one object: (dict "ctx" $ "component" "controller" "extra" $userLabels "fixed" $chartLabels),
every key but "ctx" optional. User labels (commonLabels, then "extra") come
first; the chart's own labels are set last and win, and the keys the chart
manages (selector and Helm labels) are never taken from user labels, so
commonLabels cannot break a selector, Helm's ownership or an aggregation rule.
The result is one map: a key is never rendered twice.
*/}}
{{- define "sluice.labels" -}}
{{- $ctx := .ctx -}}
{{- $labels := dict -}}
{{- range $k, $v := ($ctx.Values.commonLabels | default dict) }}{{ $_ := set $labels $k ($v | toString) }}{{ end -}}
{{- range $k, $v := (.extra | default dict) }}{{ $_ := set $labels $k ($v | toString) }}{{ end -}}
{{- range $k := include "sluice.reservedLabelKeys" $ctx | fromJsonArray }}{{ $_ := unset $labels $k }}{{ end -}}
{{- $_ := set $labels "helm.sh/chart" (printf "%s-%s" $ctx.Chart.Name $ctx.Chart.Version | replace "+" "_") -}}
{{- $_ := set $labels "app.kubernetes.io/name" (include "sluice.name" $ctx) -}}
{{- $_ := set $labels "app.kubernetes.io/instance" $ctx.Release.Name -}}
{{- $_ := set $labels "app.kubernetes.io/version" ($ctx.Chart.AppVersion | toString) -}}
{{- $_ := set $labels "app.kubernetes.io/managed-by" $ctx.Release.Service -}}
{{- with .component }}{{ $_ := set $labels "app.kubernetes.io/component" . }}{{ end -}}
{{- range $k, $v := (.fixed | default dict) }}{{ $_ := set $labels $k ($v | toString) }}{{ end -}}
{{- toYaml $labels -}}
{{- end -}}

{{/* Label keys only the chart sets (JSON list). */}}
{{- define "sluice.reservedLabelKeys" -}}
{{- toJson (list "helm.sh/chart" "app.kubernetes.io/name" "app.kubernetes.io/instance" "app.kubernetes.io/version" "app.kubernetes.io/managed-by" "app.kubernetes.io/component") -}}
{{- end -}}

{{/* Selector labels of one component: (dict "ctx" $ "component" "controller"). */}}
{{- define "sluice.selectorLabels" -}}
app.kubernetes.io/name: {{ include "sluice.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/*
Labels of one component's pods: (dict "ctx" $ "component" "controller" "extra" $podLabels).
The user's podLabels first, then the selector labels, which win: a podLabels
key that collides with a selector label is dropped, never rendered twice.
*/}}
{{- define "sluice.podLabels" -}}
{{- $labels := dict -}}
{{- range $k, $v := (.extra | default dict) }}{{ $_ := set $labels $k ($v | toString) }}{{ end -}}
{{- range $k, $v := include "sluice.selectorLabels" . | fromYaml }}{{ $_ := set $labels $k ($v | toString) }}{{ end -}}
{{- toYaml $labels -}}
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
