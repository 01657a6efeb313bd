{{/*
uprev.emit renders one object read from config/ (the chart's files/ are
links to it, so that the chart and the kustomize bases have one source):
its labels gain app.kubernetes.io/part-of: uprev, as config/default's
kustomization adds them; a namespaced object moves to .namespace, and the
ServiceAccounts that a binding names to .saNamespace (default: .namespace).
*/}}
{{- define "uprev.emit" -}}
{{- $obj := .obj -}}
{{- $meta := $obj.metadata -}}
{{- $_ := set $meta "labels" (merge (dict "app.kubernetes.io/part-of" "uprev") ($meta.labels | default dict)) -}}
{{- if not (has $obj.kind (list "ClusterRole" "ClusterRoleBinding" "CustomResourceDefinition" "Namespace")) -}}
{{- $_ := set $meta "namespace" .namespace -}}
{{- end -}}
{{- $saNamespace := .saNamespace | default .namespace -}}
{{- range $obj.subjects | default list -}}
{{- if eq .kind "ServiceAccount" -}}
{{- $_ := set . "namespace" $saNamespace -}}
{{- end -}}
{{- end }}
---
{{ toYaml $obj }}
{{- end -}}

{{/* uprev.file reads the object of the chart file at path. */}}
{{- define "uprev.file" -}}
{{- .root.Files.Get .path | required (printf "the chart has no file %s" .path) -}}
{{- end -}}
