{{/* The topologySpreadConstraints of one server's pods: call with (dict "root" $ "component" "hooks").
Each entry of <component>.topologySpreadConstraints that names no labelSelector spreads that component's
pods of the same rollout (matchLabelKeys: pod-template-hash), so the two replicas of a server land on
different nodes whenever the cluster has them; an empty list spreads nothing. */}}
{{- define "trainop.topologySpread" -}}
{{- $root := .root }}
{{- $component := .component }}
{{- $out := list }}
{{- range (index $root.Values $component).topologySpreadConstraints }}
{{- $c := deepCopy . }}
{{- if not (hasKey $c "labelSelector") }}
{{- $_ := set $c "labelSelector" (dict "matchLabels" (include "trainop.selectorLabels" (dict "root" $root "component" $component) | fromYaml)) }}
{{- if not (hasKey $c "matchLabelKeys") }}
{{- $_ := set $c "matchLabelKeys" (list "pod-template-hash") }}
{{- end }}
{{- end }}
{{- $out = append $out $c }}
{{- end }}
{{- if $out }}
{{- toYaml $out }}
{{- end }}
{{- end }}
