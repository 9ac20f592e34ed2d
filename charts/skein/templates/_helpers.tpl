{{/* Name of the chart, for labels. */}}
{{- define "skein.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Full name of the release's objects. */}}
{{- define "skein.fullname" -}}
{{- if contains .Chart.Name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{- define "skein.selectorLabels" -}}
app.kubernetes.io/name: {{ include "skein.name" . }}-operator
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "skein.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "skein.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "skein.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "skein.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* Rules for the objects the operator reads and writes in watched namespaces. */}}
{{- define "skein.rules" -}}
- apiGroups: ["skein.dev"]
  resources: ["kafkaclusters"]
  verbs: ["get", "list", "watch", "patch", "update"]
- apiGroups: ["skein.dev"]
  # Topics created through the Kafka API get a Topic resource.
  resources: ["topics"]
  verbs: ["get", "list", "watch", "create", "patch", "update"]
- apiGroups: ["skein.dev"]
  resources: ["kafkausers"]
  verbs: ["get", "list", "watch", "patch", "update"]
- apiGroups: ["skein.dev"]
  resources: ["kafkaclusters/status", "topics/status", "kafkausers/status"]
  verbs: ["get", "patch", "update"]
- apiGroups: ["skein.dev"]
  # Owner references with blockOwnerDeletion need this.
  resources: ["kafkaclusters/finalizers", "topics/finalizers", "kafkausers/finalizers"]
  verbs: ["update"]
- apiGroups: ["apps"]
  resources: ["statefulsets"]
  verbs: ["get", "list", "watch", "create", "patch", "update", "delete"]
- apiGroups: [""]
  resources: ["services", "configmaps", "serviceaccounts"]
  verbs: ["get", "list", "watch", "create", "patch", "update", "delete"]
- apiGroups: [""]
  # spec.listeners.controlPlaneTls: the control plane's CA and certificates;
  # KafkaUsers: each user's Secret, and a password Secret the spec names.
  resources: ["secrets"]
  verbs: ["get", "create", "patch"]
- apiGroups: [""]
  # Pods are watched for broker liveness and deleted one at a time to roll them.
  resources: ["pods"]
  verbs: ["get", "list", "watch", "delete"]
- apiGroups: [""]
  resources: ["persistentvolumeclaims"]
  # patch: growing the brokers' volumes (spec.storage.size)
  verbs: ["get", "list", "watch", "patch"]
- apiGroups: ["policy"]
  resources: ["poddisruptionbudgets"]
  verbs: ["get", "list", "watch", "create", "patch", "update", "delete"]
- apiGroups: ["networking.k8s.io"]
  # networkPolicy.enabled: each cluster's brokers get a NetworkPolicy;
  # ingress listeners get an Ingress per broker host.
  resources: ["networkpolicies", "ingresses"]
  verbs: ["get", "list", "watch", "create", "patch", "update", "delete"]
- apiGroups: ["events.k8s.io"]
  resources: ["events"]
  verbs: ["create", "patch"]
{{- end }}
