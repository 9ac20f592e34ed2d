//! The `KafkaCluster`, `Topic` and `KafkaUser` custom resources (group `skein.dev`,
//! version `v1alpha1`) and the CRD YAML generated from them.
//!
//! The YAML committed under `crds/yaml/` and `charts/skein/crds/` is checked
//! against [`crd_yaml`] by this crate's tests, so it can never drift from the
//! Rust types. Regenerate with `SKEIN_UPDATE_CRDS=1 cargo test -p skein-crds`
//! or `skein-operator crds`.

pub mod cluster_status;
pub mod condition;
pub mod day2;
mod immutable;
pub mod kafka_cluster;
pub mod kafka_user;
pub mod roll;
pub mod topic;

pub use condition::{ConditionStatus, ConditionType};
pub use day2::{
    BalanceApproval, BalanceMove, BalanceStatus, BalancerSpec, BrokerBalance, CredentialsSecret,
    SelfHealingSpec, TieredStorageSpec,
};
pub use kafka_cluster::{
    BrokerStatus, CertificateAuthorityStatus, CertificatesSpec, ClientListener, ConfigMapKey,
    IngressListener, KafkaCluster, KafkaClusterSpec, KafkaClusterStatus, ListenerAuthentication,
    ListenerAuthenticationType, ListenerStatus, ListenerType, ListenersSpec, OAuthListener,
    PodTemplateSpec, ProducerIdBlockStatus, RackSpec, StorageSpec, UncleanRecoveryStatus,
};
pub use kafka_user::{
    AclOperationName, AclPatternType, AclResource, AclResourceType, AclRule, AclRuleType,
    AuthenticationType, KafkaUser, KafkaUserSpec, KafkaUserStatus, ManagedAcl, PasswordSource,
    UserAuthentication, UserAuthorization, UserQuotas,
};
pub use roll::{ImageRollbackStatus, RollPolicySpec, RollStatus};
pub use topic::{ClusterRef, PartitionStatus, Topic, TopicSpec, TopicStatus, TopicStorageStatus};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

/// The API group of every Skein resource.
pub const GROUP: &str = "skein.dev";
/// The served and stored version.
pub const VERSION: &str = "v1alpha1";

/// Every CRD this crate defines, in a stable order.
pub fn crds() -> Vec<CustomResourceDefinition> {
    vec![KafkaCluster::crd(), KafkaUser::crd(), Topic::crd()]
}

/// One CRD as a YAML document, the way it is committed.
pub fn crd_to_yaml(crd: &CustomResourceDefinition) -> String {
    serde_saphyr::to_string(crd).expect("a CRD always serializes to YAML")
}

/// All CRDs as one multi-document YAML stream (what `skein-operator crds` prints).
pub fn crd_yaml() -> String {
    crds()
        .iter()
        .map(|crd| format!("---\n{}", crd_to_yaml(crd)))
        .collect()
}

/// The file name a CRD is committed under: `<plural>.<group>.yaml`.
pub fn crd_file_name(crd: &CustomResourceDefinition) -> String {
    format!("{}.yaml", crd.metadata.name.as_deref().unwrap_or("unnamed"))
}
