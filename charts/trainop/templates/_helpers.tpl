{{- define "trainop.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* <release>-trainop, or just <release> when the release name already contains the chart name. */}}
{{- define "trainop.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "trainop.hooksName" -}}
{{- printf "%s-hooks" (include "trainop.fullname" .) }}
{{- end }}

{{- define "trainop.webhooksName" -}}
{{- printf "%s-webhooks" (include "trainop.fullname" .) }}
{{- end }}

{{- define "trainop.certSecretName" -}}
{{- default (printf "%s-webhook-cert" (include "trainop.fullname" .)) .Values.webhooks.certSecretName }}
{{- end }}

{{/* How the webhook server gets its certificate: "files" (a Secret mounted: cert-manager's, or made by you
with webhooks.caBundle set), else "self" (it issues its own, keeps it in that Secret and injects caBundle). */}}
{{- define "trainop.webhookCertMode" -}}
{{- if or .Values.certManager.enabled .Values.webhooks.caBundle }}files{{ else }}self{{ end }}
{{- end }}

{{- define "trainop.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "trainop.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: trainop
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Selector labels of one component: call with (dict "root" $ "component" "hooks"). */}}
{{- define "trainop.selectorLabels" -}}
app.kubernetes.io/name: {{ include "trainop.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "trainop.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}

{{/* The kind table, generated from the framework registry (trainop/frameworks/) by `trainop crds --write`. */}}
{{- define "trainop.kinds" -}}
{{- .Files.Get "files/kinds.yaml" }}
{{- end }}

{{/* Job plurals as YAML list items, for rules; call with (dict "root" $ "suffix" "/status"). */}}
{{- define "trainop.plurals" -}}
{{- $spec := include "trainop.kinds" .root | fromYaml }}
{{- $items := list }}
{{- range $spec.kinds }}
{{- $items = append $items (printf "- %s%s" .plural $.suffix) }}
{{- end }}
{{- join "\n" $items }}
{{- end }}

{{/* The extensions' cluster settings, the same for webhooks and hooks (the sync admits every job again). */}}
{{- define "trainop.extensionEnv" -}}
{{- $placement := list }}
{{- range $rtype, $policy := .Values.placement.defaults }}
{{- $placement = append $placement (printf "%s=%s" $rtype $policy) }}
{{- end }}
- name: TRAINOP_PLACEMENT_DEFAULTS
  value: {{ join "," $placement | quote }}
- name: TRAINOP_TENSORBOARD_IMAGE
  value: {{ .Values.tensorboard.image | quote }}
- name: TRAINOP_TENSORBOARD_KEEP_AFTER
  value: {{ .Values.tensorboard.keepAfter | quote }}
- name: TRAINOP_TENSORBOARD_INGRESS_FROM
  value: {{ .Values.tensorboard.ingressFrom | toJson | quote }}
- name: TRAINOP_DEFAULT_PARAMETER_SERVER
  value: {{ .Values.tensorflow.defaultParameterServer | quote }}
{{- end }}

{{/* The bundled Metacontroller's user, named as the subchart names its ServiceAccount
(metacontroller.serviceAccountName of metacontroller-helm, whose chart name is the alias "metacontroller"). */}}
{{- define "trainop.metacontrollerUser" -}}
{{- $mc := .Values.metacontroller }}
{{- $name := dig "serviceAccount" "name" "" $mc }}
{{- if not $name }}
{{- if not (dig "serviceAccount" "create" true $mc) }}
{{- $name = "default" }}
{{- else if $mc.fullnameOverride }}
{{- $name = $mc.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $chart := default "metacontroller" $mc.nameOverride }}
{{- $name = ternary .Release.Name (printf "%s-%s" .Release.Name $chart) (contains $chart .Release.Name) | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- printf "system:serviceaccount:%s:%s" .Release.Namespace $name }}
{{- end }}
