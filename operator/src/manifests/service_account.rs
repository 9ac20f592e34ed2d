//! The brokers' ServiceAccount. Brokers need no Kubernetes API access, so no
//! token is mounted.

use k8s_openapi::api::core::v1::ServiceAccount;
use skein_crds::KafkaCluster;

use super::{owned_meta, ClusterNames};

/// Builds the ServiceAccount the broker pods run as.
pub fn build(kc: &KafkaCluster, names: &ClusterNames) -> ServiceAccount {
    ServiceAccount {
        metadata: owned_meta(kc, names, names.service_account()),
        automount_service_account_token: Some(false),
        ..ServiceAccount::default()
    }
}
