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

{{/*
Rules for the objects the operator reads and writes in watched namespaces:
exactly the verbs it uses (server-side apply is `patch`, and `create` when
the object is new). Nothing is cluster-scoped: with watchNamespaces these are
Roles, one per namespace, and the operator needs no ClusterRole at all.
*/}}
{{- define "skein.rules" -}}
- apiGroups: ["skein.dev"]
  resources: ["kafkaclusters"]
  # patch: removing the skein.dev/force-*-ca annotations once acted on.
  verbs: ["get", "list", "watch", "patch"]
- apiGroups: ["skein.dev"]
  # Topics created through the Kafka API get a Topic resource; patch: finalizers.
  resources: ["topics"]
  verbs: ["get", "list", "watch", "create", "patch"]
- apiGroups: ["skein.dev"]
  # patch: finalizers.
  resources: ["kafkausers"]
  verbs: ["get", "list", "watch", "patch"]
- apiGroups: ["skein.dev"]
  resources: ["kafkaclusters/status", "topics/status", "kafkausers/status"]
  verbs: ["patch"]
- apiGroups: ["skein.dev"]
  # Owner references with blockOwnerDeletion need this.
  resources: ["kafkaclusters/finalizers", "topics/finalizers", "kafkausers/finalizers"]
  verbs: ["update"]
- apiGroups: ["apps"]
  # Never deleted by the operator: garbage-collected with their KafkaCluster.
  resources: ["statefulsets"]
  verbs: ["get", "list", "watch", "create", "patch"]
- apiGroups: [""]
  # delete: listener Services no longer wanted.
  resources: ["services"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
- apiGroups: [""]
  # update and delete: the controller's metadata log (its head is replaced
  # with a resourceVersion precondition; blobs no head names are deleted).
  resources: ["configmaps"]
  verbs: ["get", "list", "watch", "create", "patch", "update", "delete"]
- apiGroups: [""]
  resources: ["serviceaccounts"]
  verbs: ["get", "list", "watch", "create", "patch"]
- apiGroups: [""]
  # The CAs and certificates of the listeners and the control plane, each
  # KafkaUser's Secret, a password Secret a KafkaUser names. Read one by one
  # by name (no list, no watch) and never deleted (garbage collection does).
  # The operator writes a Secret only while it is absent or owned by the
  # resource it writes it for (docs/security.md).
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
  verbs: ["get", "list", "watch", "create", "patch"]
- apiGroups: ["networking.k8s.io"]
  # networkPolicy.enabled: each cluster's brokers get a NetworkPolicy (left
  # in place when the option is turned off).
  resources: ["networkpolicies"]
  verbs: ["get", "list", "watch", "create", "patch"]
- apiGroups: ["networking.k8s.io"]
  # ingress listeners: an Ingress per broker host, deleted when no longer wanted.
  resources: ["ingresses"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
- apiGroups: ["events.k8s.io"]
  resources: ["events"]
  verbs: ["create", "patch"]
{{- end }}
