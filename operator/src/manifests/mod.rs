//! Builders: every object the operator owns for a `KafkaCluster`, each a pure
//! function of the (validated) cluster. One file per resource kind.

pub mod config_map;
pub mod control_tls;
pub mod listeners;
pub mod network_policy;
pub mod pdb;
pub mod service;
pub mod service_account;
pub mod statefulset;

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Service, ServiceAccount};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::{Resource, ResourceExt};
use skein_crds::KafkaCluster;

/// Label keys and the values the operator puts on everything it makes.
pub mod labels {
    pub const NAME: &str = "app.kubernetes.io/name";
    pub const INSTANCE: &str = "app.kubernetes.io/instance";
    pub const COMPONENT: &str = "app.kubernetes.io/component";
    pub const MANAGED_BY: &str = "app.kubernetes.io/managed-by";
    pub const APP_NAME: &str = "skein";
    pub const BROKER: &str = "broker";
    pub const OPERATOR: &str = "skein-operator";
}

/// Annotation on the broker pod template: hash of `server.properties`, so the
/// roller can tell which pods run a stale configuration.
pub const CONFIG_HASH_ANNOTATION: &str = "skein.dev/config-hash";

/// Field manager of every server-side apply the reconcilers make.
pub const FIELD_MANAGER: &str = "skein-operator";

/// Settings of the operator itself that shape the objects.
#[derive(Clone, Debug)]
pub struct BuildOptions {
    /// Broker image used when the KafkaCluster does not name one.
    pub default_broker_image: String,
    /// Give every cluster a NetworkPolicy ([`network_policy`]).
    pub network_policies: bool,
    /// Where the operator's pods run and their labels: the only peers of
    /// the brokers' control port under a NetworkPolicy.
    pub operator_namespace: String,
    pub operator_pod_labels: BTreeMap<String, String>,
    /// Shortest phase of a CA replacement ([`crate::ca`]) and the length
    /// of a certificate day.
    pub certificates: crate::ca::Timing,
}

impl Default for BuildOptions {
    fn default() -> Self {
        BuildOptions {
            default_broker_image: format!(
                "ghcr.io/skein-dev/skein-broker:{}",
                env!("CARGO_PKG_VERSION")
            ),
            network_policies: false,
            operator_namespace: "default".into(),
            operator_pod_labels: BTreeMap::from([(
                labels::NAME.to_string(),
                labels::OPERATOR.to_string(),
            )]),
            certificates: crate::ca::Timing::default(),
        }
    }
}

/// Names of a cluster's objects, all derived from the KafkaCluster's name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterNames {
    pub cluster: String,
    pub namespace: String,
}

impl ClusterNames {
    /// Names for this cluster. The cluster must be namespaced (the CRD is).
    pub fn of(kc: &KafkaCluster) -> Self {
        ClusterNames {
            cluster: kc.name_any(),
            namespace: kc.namespace().unwrap_or_else(|| "default".into()),
        }
    }
    /// The StatefulSet; pods are `<cluster>-<ordinal>`.
    pub fn statefulset(&self) -> String {
        self.cluster.clone()
    }
    /// Headless Service that gives each broker pod a stable DNS name.
    pub fn headless_service(&self) -> String {
        format!("{}-brokers", self.cluster)
    }
    /// Broker `id`'s stable DNS name (its pod in the headless Service) with `port`.
    pub fn broker_host_port(&self, id: i32, port: i32) -> String {
        format!(
            "{}-{id}.{}.{}.svc:{port}",
            self.statefulset(),
            self.headless_service(),
            self.namespace,
        )
    }
    /// Service clients bootstrap from.
    pub fn bootstrap_service(&self) -> String {
        format!("{}-bootstrap", self.cluster)
    }
    pub fn config_map(&self) -> String {
        format!("{}-config", self.cluster)
    }
    pub fn service_account(&self) -> String {
        format!("{}-broker", self.cluster)
    }
    pub fn pdb(&self) -> String {
        self.cluster.clone()
    }
    /// The control plane's CA and the controller's certificate (only the
    /// operator reads it).
    pub fn control_ca_secret(&self) -> String {
        format!("{}-control-ca", self.cluster)
    }
    /// The brokers' control-plane certificate and the CA (mounted into the
    /// broker pods).
    pub fn control_tls_secret(&self) -> String {
        format!("{}-control-tls", self.cluster)
    }
    /// The client listeners' certificate authority (its key; only the
    /// operator reads it).
    pub fn cluster_ca_secret(&self) -> String {
        format!("{}-cluster-ca", self.cluster)
    }
    /// The cluster CA's certificate, for clients (Secret and ConfigMap).
    pub fn cluster_ca_cert(&self) -> String {
        format!("{}-cluster-ca-cert", self.cluster)
    }
    /// The certificate authority of client certificates (its key; only the
    /// operator reads it).
    pub fn clients_ca_secret(&self) -> String {
        format!("{}-clients-ca", self.cluster)
    }
    /// The brokers' listener certificate and the CAs (mounted into the
    /// broker pods).
    pub fn listener_tls_secret(&self) -> String {
        format!("{}-listener-tls", self.cluster)
    }
    /// The key SCRAM credentials are sealed with in the controller's
    /// metadata log (only the operator reads it;
    /// [`crate::metadata_store::ensure_key`]).
    pub fn controller_key_secret(&self) -> String {
        format!("{}-controller-key", self.cluster)
    }
    /// The brokers' `delegation.token.secret.key`, with
    /// `spec.delegationTokens.enabled` ([`crate::delegation_token_key`]).
    pub fn delegation_token_secret(&self) -> String {
        format!("{}-delegation-token-key", self.cluster)
    }
    /// Every Secret the operator writes for the cluster. A KafkaUser may not
    /// take a name that is one of these for any cluster
    /// ([`crate::validate::validate_user`]).
    pub fn secret_names(&self) -> [String; 8] {
        [
            self.cluster_ca_secret(),
            self.cluster_ca_cert(),
            self.clients_ca_secret(),
            self.listener_tls_secret(),
            self.control_ca_secret(),
            self.control_tls_secret(),
            self.controller_key_secret(),
            self.delegation_token_secret(),
        ]
    }
    /// The brokers' NetworkPolicy.
    pub fn network_policy(&self) -> String {
        format!("{}-brokers", self.cluster)
    }
    /// Stable DNS name of broker `ordinal`.
    pub fn broker_host(&self, ordinal: i32) -> String {
        format!(
            "{}-{ordinal}.{}.{}.svc",
            self.cluster,
            self.headless_service(),
            self.namespace
        )
    }
    /// `bootstrap.servers` for clients inside the cluster.
    pub fn bootstrap_address(&self, port: i32) -> String {
        format!("{}.{}.svc:{port}", self.bootstrap_service(), self.namespace)
    }
}

/// Labels that select a cluster's broker pods (never change: they are in the
/// StatefulSet's immutable selector).
pub fn selector_labels(names: &ClusterNames) -> BTreeMap<String, String> {
    BTreeMap::from([
        (labels::NAME.to_string(), labels::APP_NAME.to_string()),
        (labels::INSTANCE.to_string(), names.cluster.clone()),
        (labels::COMPONENT.to_string(), labels::BROKER.to_string()),
    ])
}

/// The selector as a label-selector string, for the scale subresource.
pub fn selector_string(names: &ClusterNames) -> String {
    selector_labels(names)
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// Labels on every object of the cluster.
pub fn common_labels(names: &ClusterNames) -> BTreeMap<String, String> {
    let mut l = selector_labels(names);
    l.insert(labels::MANAGED_BY.to_string(), labels::OPERATOR.to_string());
    l
}

/// Metadata of an owned object: name, namespace, labels and the controller
/// owner reference that makes Kubernetes garbage-collect it with the cluster.
pub fn owned_meta(kc: &KafkaCluster, names: &ClusterNames, name: String) -> ObjectMeta {
    ObjectMeta {
        name: Some(name),
        namespace: Some(names.namespace.clone()),
        labels: Some(common_labels(names)),
        owner_references: kc.controller_owner_ref(&()).map(|o| vec![o]),
        ..ObjectMeta::default()
    }
}

/// Everything a cluster consists of, in the order it is applied.
#[derive(Clone, Debug)]
pub struct ClusterObjects {
    pub config_map: ConfigMap,
    pub headless_service: Service,
    pub bootstrap_service: Service,
    pub service_account: ServiceAccount,
    pub pdb: PodDisruptionBudget,
    /// When the operator makes NetworkPolicies.
    pub network_policy: Option<NetworkPolicy>,
    pub statefulset: StatefulSet,
}

/// Builds every object of the cluster. Pure: same input, same output.
/// `listener_services`: the `nodeport` listeners' Services as applied (their
/// node ports go into the ConfigMap).
pub fn cluster_objects(
    kc: &KafkaCluster,
    opts: &BuildOptions,
    listener_services: &[Service],
) -> ClusterObjects {
    let names = ClusterNames::of(kc);
    let config_map = config_map::build(
        kc,
        &names,
        listeners::config_map_entries(kc, &names, listener_services),
    );
    let config_hash = config_map::properties_hash(&config_map);
    ClusterObjects {
        headless_service: service::build_headless(kc, &names),
        bootstrap_service: service::build_bootstrap(kc, &names),
        service_account: service_account::build(kc, &names),
        pdb: pdb::build(kc, &names),
        network_policy: network_policy::build(kc, &names, opts),
        statefulset: statefulset::build(kc, &names, opts, &config_hash),
        config_map,
    }
}

/// A KafkaCluster `demo` in namespace `ns` with `spec`, for tests of what is
/// built from it.
#[cfg(test)]
pub(crate) fn test_cluster(spec: serde_json::Value) -> KafkaCluster {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "skein.dev/v1alpha1", "kind": "KafkaCluster",
        "metadata": {"name": "demo", "namespace": "ns", "uid": "u1"}, "spec": spec,
    }))
    .unwrap()
}
