//! Status of both resources as pure functions of what was observed.
//!
//! The reconcilers own only part of each status (conditions, observed
//! generation, replica counts, bootstrap address). Partition metadata, broker
//! registrations and producer ids belong to the cluster controller, which
//! writes them under its own field manager; server-side apply keeps the two
//! from erasing each other's fields, so the patches here never mention them.

use k8s_openapi::api::apps::v1::StatefulSetStatus;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use serde::Serialize;
use skein_crds::condition::condition;
use skein_crds::{ConditionStatus as S, ConditionType as T, KafkaCluster, PartitionStatus, Topic};

use crate::manifests::{selector_string, ClusterNames};
use crate::reconcile::desired_cluster::DesiredCluster;
use crate::validate::InvalidSpec;

/// The part of `KafkaCluster.status` the reconciler writes.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterStatusPatch {
    pub conditions: Vec<Condition>,
    pub observed_generation: Option<i64>,
    pub replicas: i32,
    pub ready_replicas: i32,
    pub selector: String,
    pub bootstrap: String,
    /// Every listener and its bootstrap address (set by the reconciler).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub listeners: Vec<skein_crds::ListenerStatus>,
    /// The TLS listeners' CAs (set by the reconciler).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub certificate_authorities: Vec<skein_crds::CertificateAuthorityStatus>,
    /// From the cluster's controller, when one runs (kubernetes platform).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub brokers: Option<Vec<skein_crds::BrokerStatus>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub under_replicated_partitions: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offline_partitions: Option<i32>,
    /// The balancer's plan (absent: none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub balance: Option<skein_crds::BalanceStatus>,
    /// The finalized `skein.version` (from the cluster's controller).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub feature_level: Option<i16>,
    /// The last unclean recoveries (this patch owns the list: each write
    /// carries the earlier ones on).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unclean_recoveries: Vec<skein_crds::UncleanRecoveryStatus>,
    /// The rolling restart in progress.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub roll: Option<skein_crds::RollStatus>,
    /// The image every broker ran, ready, at the end of the last roll
    /// (carried on by each write).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub broker_image: Option<String>,
    /// An image roll undone, while spec.image still names its image.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image_rollback: Option<skein_crds::ImageRollbackStatus>,
}

/// How many unclean recoveries the status keeps.
pub const UNCLEAN_RECOVERIES_KEPT: usize = 10;

/// The status's unclean recoveries: those it had, then `new` ones seen
/// `now`, the last [`UNCLEAN_RECOVERIES_KEPT`].
pub fn unclean_recoveries(
    kc: &KafkaCluster,
    new: &[skein_controller::unclean_recovery::RecoveryNote],
    now: Time,
) -> Vec<skein_crds::UncleanRecoveryStatus> {
    let mut all: Vec<_> = kc
        .status
        .as_ref()
        .map(|s| s.unclean_recoveries.clone())
        .unwrap_or_default();
    all.extend(new.iter().map(|r| skein_crds::UncleanRecoveryStatus {
        time: now.clone(),
        topic: r.topic.clone(),
        partition: r.partition as i32,
        leader: r.leader,
        leader_epoch: r.leader_epoch,
        log_end_offset: r.log_end_offset,
        highest_reported_offset: r.highest_reported_offset,
        unreported_brokers: r.unreported.clone(),
    }));
    let drop = all.len().saturating_sub(UNCLEAN_RECOVERIES_KEPT);
    all.drain(..drop);
    all
}

/// The balancer's condition (`Balanced`), when it said something.
pub fn set_balanced(
    patch: &mut ClusterStatusPatch,
    kc: &KafkaCluster,
    balanced: bool,
    reason: &str,
    message: &str,
    now: Time,
) {
    put_condition(
        patch,
        kc,
        T::Balanced,
        S::from(balanced),
        reason,
        message.to_string(),
        now,
    );
}

/// Puts a condition in the patch in place of any of its type (its
/// transition time carried over from the status when unchanged).
fn put_condition(
    patch: &mut ClusterStatusPatch,
    kc: &KafkaCluster,
    type_: T,
    status: S,
    reason: &str,
    message: String,
    now: Time,
) {
    let c = condition(
        previous_cluster_conditions(kc),
        type_,
        status,
        reason,
        message,
        kc.metadata.generation,
        now,
    );
    patch.conditions.retain(|c| c.type_ != type_.as_str());
    patch.conditions.push(c);
}

/// `Degraded=True` for `reason`, unless the patch already reports it.
fn degrade_unless_worse(
    patch: &mut ClusterStatusPatch,
    kc: &KafkaCluster,
    reason: &str,
    message: String,
    now: Time,
) {
    let worse = patch
        .conditions
        .iter()
        .any(|c| c.type_ == T::Degraded.as_str() && c.status == "True");
    if !worse {
        put_condition(patch, kc, T::Degraded, S::True, reason, message, now);
    }
}

/// The finalized `skein.version`, and `Degraded` (`FeatureLevelBlocked`)
/// while the level of the spec cannot be finalized.
pub fn set_feature_level(
    patch: &mut ClusterStatusPatch,
    kc: &KafkaCluster,
    finalized: i16,
    blocked: Option<&str>,
    now: Time,
) {
    patch.feature_level = Some(finalized);
    if let Some(why) = blocked {
        degrade_unless_worse(
            patch,
            kc,
            "FeatureLevelBlocked",
            format!("spec.featureLevel cannot be finalized: {why}"),
            now,
        );
    }
}

/// Marks the cluster as converging (`Reconciling=True`, not `Ready`) for
/// `reason`: a drain, a replica move or a rolling restart in progress.
pub fn set_progress(
    patch: &mut ClusterStatusPatch,
    kc: &KafkaCluster,
    reason: &str,
    message: &str,
    now: Time,
) {
    let prev = previous_cluster_conditions(kc);
    let generation = kc.metadata.generation;
    patch
        .conditions
        .retain(|c| c.type_ != T::Reconciling.as_str() && c.type_ != T::Ready.as_str());
    patch.conditions.push(condition(
        prev,
        T::Ready,
        S::False,
        reason,
        message.to_string(),
        generation,
        now.clone(),
    ));
    patch.conditions.push(condition(
        prev,
        T::Reconciling,
        S::True,
        reason,
        message.to_string(),
        generation,
        now,
    ));
}

/// The volumes' growth (`Resizing`), and a storage that refused it or
/// volumes larger than the spec (`Degraded`, unless something worse is
/// reported already). `Ready` is left alone: brokers serve while their
/// volumes grow.
pub fn set_volumes(
    patch: &mut ClusterStatusPatch,
    kc: &KafkaCluster,
    report: &crate::reconcile::storage::VolumeReport,
    now: Time,
) {
    use crate::reconcile::storage::VolumeReport as R;
    let (status, reason, message, degraded) = match report {
        R::AtSize { volumes } => (
            S::False,
            "VolumesAtSize",
            format!(
                "all {volumes} broker volumes have {}",
                kc.spec.storage.size.0
            ),
            false,
        ),
        R::Resizing { detail, .. } => (S::True, "ResizingVolumes", detail.clone(), false),
        R::ExpansionRefused { message } => {
            (S::False, "VolumeExpansionRefused", message.clone(), true)
        }
        R::LargerThanSpec { message } => (S::False, "VolumesLargerThanSpec", message.clone(), true),
    };
    put_condition(
        patch,
        kc,
        T::Resizing,
        status,
        reason,
        message.clone(),
        now.clone(),
    );
    if degraded {
        degrade_unless_worse(patch, kc, reason, message, now);
    }
}

/// Self-healing as it stands: `SelfHealing` True while a lost broker's
/// grace period runs or its replicas are being re-created elsewhere, False
/// otherwise (with the reason); `Degraded` (unless something worse is
/// reported) when a lost broker's replicas cannot be re-created.
/// `lost_since` is the controller's (Unix milliseconds), `now_ms` the same
/// clock now.
pub fn set_self_healing(
    patch: &mut ClusterStatusPatch,
    kc: &KafkaCluster,
    desired: &DesiredCluster,
    view: &skein_controller::ClusterView,
    lost_since: &std::collections::BTreeMap<i32, u64>,
    now_ms: u64,
    now: Time,
) {
    let spec = &kc.spec.self_healing;
    let grace_ms = spec.broker_loss_grace_seconds.max(0) as u64 * 1000;
    let partitions = || view.topics.values().flat_map(|t| t.partitions.iter());
    let lost: Vec<(i32, u64)> = lost_since
        .iter()
        .filter(|(b, _)| **b < desired.replicas)
        .map(|(b, since)| (*b, now_ms.saturating_sub(*since)))
        .collect();
    let mut blocked = Vec::new();
    let (status, reason, message) = if !spec.enabled {
        (
            S::False,
            "Disabled",
            "self-healing is off (spec.selfHealing.enabled)".to_string(),
        )
    } else if lost.is_empty() {
        (S::False, "NoBrokerLost", "every broker is up".to_string())
    } else {
        let mut waiting = Vec::new();
        let mut moving = Vec::new();
        let mut restored = Vec::new();
        for (b, gone_ms) in &lost {
            let held = partitions()
                .filter(|p| p.replicas.contains(b) && !p.removing_replicas.contains(b))
                .count();
            let leaving = partitions()
                .filter(|p| p.removing_replicas.contains(b))
                .count();
            if *gone_ms < grace_ms {
                waiting.push(format!(
                    "broker {b} gone for {} s: its {held} replica(s) are re-created elsewhere in {} s unless it returns",
                    gone_ms / 1000,
                    (grace_ms - gone_ms).div_ceil(1000)
                ));
            } else if leaving > 0 {
                moving.push(format!(
                    "{leaving} partition(s) are getting a replica in place of broker {b}'s"
                ));
            } else if held > 0 {
                blocked.push(format!(
                    "broker {b}'s replicas in {held} partition(s) cannot be re-created (too few live brokers, or no in-sync replica to copy from)"
                ));
            } else {
                restored.push(format!("broker {b} is gone; its partitions have their replication factor on other brokers"));
            }
        }
        if !moving.is_empty() || !waiting.is_empty() {
            let reason = if moving.is_empty() {
                "WaitingForBroker"
            } else {
                "RestoringReplicationFactor"
            };
            (S::True, reason, [moving, waiting].concat().join("; "))
        } else if !blocked.is_empty() {
            (S::False, "SelfHealingBlocked", blocked.join("; "))
        } else {
            (S::False, "ReplicationFactorRestored", restored.join("; "))
        }
    };
    put_condition(
        patch,
        kc,
        T::SelfHealing,
        status,
        reason,
        message,
        now.clone(),
    );
    if !blocked.is_empty() {
        degrade_unless_worse(patch, kc, "SelfHealingBlocked", blocked.join("; "), now);
    }
}

/// Replicas on `broker` that are not in their partition's ISR.
fn replicas_to_recover(view: &skein_controller::ClusterView, broker: i32) -> i32 {
    view.topics
        .values()
        .flat_map(|t| &t.partitions)
        .filter(|p| p.replicas.contains(&broker) && !p.isr.contains(&broker))
        .count() as i32
}

/// Adds what the cluster's controller knows: its brokers and their
/// sessions, under-replicated and offline partitions (offline ones make the
/// cluster `Degraded`).
pub fn add_controller_view(
    patch: &mut ClusterStatusPatch,
    kc: &KafkaCluster,
    desired: &DesiredCluster,
    view: &skein_controller::ClusterView,
    now: Time,
) {
    patch.brokers = Some(
        view.brokers
            .values()
            .filter(|b| b.alive || b.id < desired.replicas)
            .map(|b| skein_crds::BrokerStatus {
                id: b.id,
                host: format!("{}:{}", b.host, b.port),
                ready: b.alive,
                rack: b.rack.clone(),
                replicas_to_recover: b.storage_lost.then(|| replicas_to_recover(view, b.id)),
                storage_losses: (b.storage_losses > 0).then_some(b.storage_losses as i32),
                version: b.software_version.clone(),
            })
            .collect(),
    );
    let health = view.partition_health();
    let offline = health.offline;
    patch.under_replicated_partitions = Some(health.under_replicated as i32);
    patch.offline_partitions = Some(offline as i32);
    if offline > 0 {
        let degraded = condition(
            previous_cluster_conditions(kc),
            T::Degraded,
            S::True,
            "PartitionsOffline",
            format!("{offline} partition(s) have no leader"),
            kc.metadata.generation,
            now,
        );
        patch.conditions.retain(|c| c.type_ != T::Degraded.as_str());
        patch.conditions.push(degraded);
    }
}

/// The part of `Topic.status` the reconciler writes.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TopicStatusPatch {
    pub conditions: Vec<Condition>,
    pub observed_generation: Option<i64>,
}

fn previous_cluster_conditions(kc: &KafkaCluster) -> &[Condition] {
    kc.status
        .as_ref()
        .map(|s| s.conditions.as_slice())
        .unwrap_or(&[])
}

fn previous_topic_conditions(topic: &Topic) -> &[Condition] {
    topic
        .status
        .as_ref()
        .map(|s| s.conditions.as_slice())
        .unwrap_or(&[])
}

/// Status after the objects were applied; `sts` is the StatefulSet's status
/// as the API server returned it from the apply.
pub fn cluster_applied(
    kc: &KafkaCluster,
    desired: &DesiredCluster,
    sts: Option<&StatefulSetStatus>,
    now: Time,
) -> ClusterStatusPatch {
    let names = ClusterNames::of(kc);
    let generation = kc.metadata.generation;
    let prev = previous_cluster_conditions(kc);
    let want = desired.replicas;
    let replicas = sts.map(|s| s.replicas).unwrap_or(0);
    let ready = sts.and_then(|s| s.ready_replicas).unwrap_or(0);
    let all_ready = ready >= want && replicas == want;
    let (ready_reason, ready_msg) = if all_ready {
        ("AllBrokersReady", format!("{ready}/{want} brokers ready"))
    } else {
        ("BrokersNotReady", format!("{ready}/{want} brokers ready"))
    };
    let (rec_reason, rec_msg) = if all_ready {
        (
            "Reconciled",
            "all objects applied and every broker is ready".to_string(),
        )
    } else {
        (
            "WaitingForBrokers",
            format!(
                "objects applied; waiting for {} more broker(s)",
                want - ready.min(want)
            ),
        )
    };
    ClusterStatusPatch {
        conditions: vec![
            condition(
                prev,
                T::Ready,
                S::from(all_ready),
                ready_reason,
                ready_msg,
                generation,
                now.clone(),
            ),
            condition(
                prev,
                T::Reconciling,
                S::from(!all_ready),
                rec_reason,
                rec_msg,
                generation,
                now.clone(),
            ),
            condition(
                prev,
                T::Degraded,
                S::False,
                "AsExpected",
                "",
                generation,
                now,
            ),
        ],
        observed_generation: generation,
        replicas,
        ready_replicas: ready,
        selector: selector_string(&names),
        bootstrap: names.bootstrap_address(kc.spec.listeners.kafka_port),
        listeners: Vec::new(),
        certificate_authorities: Vec::new(),
        brokers: None,
        under_replicated_partitions: None,
        offline_partitions: None,
        balance: None,
        unclean_recoveries: Vec::new(),
        feature_level: None,
        roll: None,
        broker_image: None,
        image_rollback: None,
    }
}

/// Status when the spec was refused: nothing was applied, counts are kept
/// from the previous status.
pub fn cluster_invalid(kc: &KafkaCluster, invalid: &InvalidSpec, now: Time) -> ClusterStatusPatch {
    let names = ClusterNames::of(kc);
    let generation = kc.metadata.generation;
    let prev = previous_cluster_conditions(kc);
    let old = kc.status.clone().unwrap_or_default();
    let reason = invalid.reason();
    let msg = invalid.to_string();
    ClusterStatusPatch {
        conditions: vec![
            condition(
                prev,
                T::Ready,
                S::False,
                reason,
                format!("spec not applied: {msg}"),
                generation,
                now.clone(),
            ),
            condition(
                prev,
                T::Reconciling,
                S::False,
                reason,
                "waiting for a valid spec",
                generation,
                now.clone(),
            ),
            condition(prev, T::Degraded, S::True, reason, msg, generation, now),
        ],
        observed_generation: generation,
        replicas: old.replicas,
        ready_replicas: old.ready_replicas,
        selector: selector_string(&names),
        bootstrap: names.bootstrap_address(kc.spec.listeners.kafka_port),
        listeners: Vec::new(),
        certificate_authorities: Vec::new(),
        brokers: None,
        under_replicated_partitions: None,
        offline_partitions: None,
        balance: None,
        unclean_recoveries: Vec::new(),
        feature_level: old.feature_level,
        roll: None,
        broker_image: old.broker_image,
        image_rollback: old.image_rollback,
    }
}

/// Reason of a Topic's `Ready`/`Reconciling` while its partitions are
/// being reassigned to another replication factor.
pub const REPLICATION_FACTOR_CHANGING: &str = "ReplicationFactorChanging";
/// Reason while the controller cannot start that reassignment yet.
pub const REPLICATION_FACTOR_CHANGE_BLOCKED: &str = "ReplicationFactorChangeBlocked";

/// Whether a partition has `rf` replicas and no reassignment that changes
/// their number runs: its replicas before (without those being added) and
/// after (without those being removed) both count `rf`. A move that keeps
/// the number (a scale-up filling new brokers) does not count as a change.
fn has_replication_factor(p: &PartitionStatus, rf: usize) -> bool {
    let before = p.replicas.len().saturating_sub(p.adding_replicas.len());
    let after = p.replicas.len().saturating_sub(p.removing_replicas.len());
    before == rf && after == rf
}

/// Topic status when its spec is acceptable: ready once the cluster
/// controller has placed every partition, each has a leader and the
/// spec's replication factor (`placed`: the controller's partitions, from
/// its view or the mirrored status). `blocked` is why the controller
/// refused to start a replication factor change for now.
pub fn topic_accepted(
    topic: &Topic,
    placed: &[PartitionStatus],
    blocked: Option<&str>,
    now: Time,
) -> TopicStatusPatch {
    let generation = topic.metadata.generation;
    let prev = previous_topic_conditions(topic);
    let want = usize::try_from(topic.spec.partitions).unwrap_or(0);
    let rf = usize::try_from(topic.spec.replication_factor).unwrap_or(0);
    let offline = placed.iter().filter(|p| p.leader < 0).count();
    let changing = placed
        .iter()
        .filter(|p| !has_replication_factor(p, rf))
        .count();
    let (ready, reason, msg) = if placed.len() < want {
        (
            false,
            "AwaitingPlacement",
            format!(
                "{}/{want} partition(s) placed by the cluster controller",
                placed.len()
            ),
        )
    } else if offline > 0 {
        (
            false,
            "PartitionsOffline",
            format!("{offline} partition(s) have no leader"),
        )
    } else if let Some(why) = blocked.filter(|_| changing > 0) {
        (
            false,
            REPLICATION_FACTOR_CHANGE_BLOCKED,
            format!("replication factor {rf} cannot be reached now, retrying: {why}"),
        )
    } else if changing > 0 {
        (
            false,
            REPLICATION_FACTOR_CHANGING,
            format!(
                "{changing}/{} partition(s) being reassigned to replication factor {rf}: added replicas count once they have caught up and joined the ISR, removed ones go once the replicas that stay are in sync",
                placed.len()
            ),
        )
    } else {
        (
            true,
            "PartitionsOnline",
            format!("{want} partition(s) placed, each with a leader"),
        )
    };
    TopicStatusPatch {
        conditions: vec![
            condition(
                prev,
                T::Ready,
                S::from(ready),
                reason,
                msg.clone(),
                generation,
                now.clone(),
            ),
            condition(
                prev,
                T::Reconciling,
                S::from(!ready),
                reason,
                msg,
                generation,
                now.clone(),
            ),
            condition(
                prev,
                T::Degraded,
                S::from(offline > 0),
                if offline > 0 { reason } else { "AsExpected" },
                "",
                generation,
                now,
            ),
        ],
        observed_generation: generation,
    }
}

/// Topic status when its spec was refused or its cluster is missing.
pub fn topic_refused(topic: &Topic, reason: &str, message: &str, now: Time) -> TopicStatusPatch {
    let generation = topic.metadata.generation;
    let prev = previous_topic_conditions(topic);
    TopicStatusPatch {
        conditions: vec![
            condition(
                prev,
                T::Ready,
                S::False,
                reason,
                message,
                generation,
                now.clone(),
            ),
            condition(
                prev,
                T::Reconciling,
                S::False,
                reason,
                "waiting for a change",
                generation,
                now.clone(),
            ),
            condition(prev, T::Degraded, S::True, reason, message, generation, now),
        ],
        observed_generation: generation,
    }
}
