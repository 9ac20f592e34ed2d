//! PodDisruptionBudget: voluntary disruptions (node drains) take at most one
//! broker at a time, so a replication factor of 3 keeps a quorum-free ISR of 2.
//! A broker is healthy for it only while Ready (its `/readyz`: in the ISR of
//! every partition it follows), so an eviction waits until the broker
//! evicted last is back in sync; and the reconcile sets `maxUnavailable: 0`
//! while a partition is at its `min.insync.replicas`
//! (`reconcile::roll::cannot_spare_a_broker`).

use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use skein_crds::KafkaCluster;

use super::{owned_meta, selector_labels, ClusterNames};

/// No eviction at all (`maxUnavailable: 0`): a partition is at its
/// `min.insync.replicas`, and losing a member would stop its writes.
pub fn refuse_evictions(pdb: &mut PodDisruptionBudget) {
    if let Some(spec) = pdb.spec.as_mut() {
        spec.max_unavailable = Some(IntOrString::Int(0));
    }
}

/// Builds the brokers' PodDisruptionBudget (`maxUnavailable: 1`).
pub fn build(kc: &KafkaCluster, names: &ClusterNames) -> PodDisruptionBudget {
    PodDisruptionBudget {
        metadata: owned_meta(kc, names, names.pdb()),
        spec: Some(PodDisruptionBudgetSpec {
            max_unavailable: Some(IntOrString::Int(1)),
            selector: Some(LabelSelector {
                match_labels: Some(selector_labels(names)),
                ..LabelSelector::default()
            }),
            ..PodDisruptionBudgetSpec::default()
        }),
        ..PodDisruptionBudget::default()
    }
}
