//! Feature levels: which formats the cluster's processes may write and send.
//!
//! Kafka versions what brokers persist and exchange with `metadata.version`
//! (`kafka-features`): a broker supports a range of levels, the cluster runs
//! at one finalized level, and a format of level L is written only once every
//! broker supports L. Skein's feature is `skein.version`; its levels:
//!
//! | level | release | what it allows |
//! |-------|---------|----------------|
//! | 1     | 0.1.0   | the 0.1.0 control plane, metadata log and disk formats |
//! | 2     | 0.2.0   | the finalized level is recorded in the metadata log, whose head becomes format 2 |
//! | 3     | 0.2.0   | SCRAM credentials in the metadata log are sealed with the cluster's key Secret (Kubernetes); the log's head becomes format 3 |
//! | 4     | 0.2.0   | delegation tokens (KIP-48): the metadata log holds token records; partition records hold the last known ELR (KIP-966) |
//! | 5     | 0.2.0   | client-metrics subscriptions (KIP-714) and group configs: the metadata log holds resource-config records |
//!
//! Kafka's `share.version` (KIP-932 share groups) and `streams.version`
//! (KIP-1071 streams groups; each: a new cluster starts at 1, an older one
//! at 0 until finalized) and `transaction.version` are
//! finalizable too, as in Kafka 4.x: 0
//! (transactions as before), 1 (`__transaction_state` values in the
//! flexible format v1), 2 (KIP-890 part 2: clients bump the producer epoch
//! with every EndTxn and add partitions by producing). Clients read its
//! finalized level from ApiVersions and change their protocol on it.
//!
//! A release supports at least the previous release's highest level, so a
//! roll in either direction between neighbouring releases keeps working
//! while the cluster stays at that level (docs/upgrades.md). Fields a peer
//! may not know are optional on the wire (protobuf ignores unknown fields)
//! and defaulted in the metadata log (serde); a request kind a controller
//! does not know is answered `UNSUPPORTED_VERSION`, never dropped.

use serde::{Deserialize, Serialize};

/// The levels of one feature a process supports, both ends included.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FeatureRange {
    pub name: String,
    pub min: i16,
    pub max: i16,
}

/// Skein's feature.
pub const SKEIN_VERSION: &str = "skein.version";
/// The lowest `skein.version` this release runs at.
pub const SKEIN_VERSION_MIN: i16 = 1;
/// The highest `skein.version` this release runs at.
pub const SKEIN_VERSION_MAX: i16 = 5;
/// From this level on, SCRAM credentials are sealed in a metadata store
/// that has a key (`store::seal`; the Kubernetes platform's ConfigMaps).
pub const SEALED_CREDENTIALS_LEVEL: i16 = 3;
/// From this level on, delegation tokens may be created and partitions keep
/// their last known ELR: the metadata log holds token records and 9-element
/// partition records, which a controller of an older release cannot read.
pub const DELEGATION_TOKENS_LEVEL: i16 = 4;
/// From this level on, CLIENT_METRICS and GROUP config resources may be
/// set: the metadata log holds resource-config records.
pub const CONFIG_RESOURCES_LEVEL: i16 = 5;

/// Kafka's transaction protocol version (KIP-890 part 2).
pub const TRANSACTION_VERSION: &str = "transaction.version";
/// The highest `transaction.version` this release runs at.
pub const TRANSACTION_VERSION_MAX: i16 = 2;
/// The `transaction.version` a new cluster starts at: Kafka 4.0+ formats a
/// new cluster at 2, and nothing older ever wrote to a new cluster.
pub const TRANSACTION_VERSION_NEW_CLUSTER: i16 = 2;

/// Kafka's share-group feature (KIP-932): share groups are served from
/// level 1 (level 2, Kafka 4.4's dead-letter queues, is not supported).
pub const SHARE_VERSION: &str = "share.version";
/// The highest `share.version` this release runs at.
pub const SHARE_VERSION_MAX: i16 = 1;

/// Kafka's streams-group feature (KIP-1071): streams groups are served
/// from level 1 (with `streams` in `group.coordinator.rebalance.protocols`).
pub const STREAMS_VERSION: &str = "streams.version";
/// The highest `streams.version` this release runs at.
pub const STREAMS_VERSION_MAX: i16 = 1;

/// The feature levels this release supports (what a broker registers).
pub fn supported() -> Vec<FeatureRange> {
    vec![
        FeatureRange {
            name: SKEIN_VERSION.into(),
            min: SKEIN_VERSION_MIN,
            max: SKEIN_VERSION_MAX,
        },
        FeatureRange {
            name: TRANSACTION_VERSION.into(),
            min: 0,
            max: TRANSACTION_VERSION_MAX,
        },
        FeatureRange {
            name: SHARE_VERSION.into(),
            min: 0,
            max: SHARE_VERSION_MAX,
        },
        FeatureRange {
            name: STREAMS_VERSION.into(),
            min: 0,
            max: STREAMS_VERSION_MAX,
        },
    ]
}

/// The level of `feature` where nothing finalized it: a metadata log
/// written before the feature existed, or a broker of such a release.
/// `skein.version` 1 is what 0.1.0 ran at; a cluster from before
/// `transaction.version` ran its transactions at 0 (values v0, epoch
/// bumped by InitProducerId only), so it stays there until finalized.
pub fn level_when_unset(feature: &str) -> i16 {
    match feature {
        TRANSACTION_VERSION | SHARE_VERSION | STREAMS_VERSION => 0,
        _ => 1,
    }
}

/// The levels this release supports of `feature`, if it knows it.
pub fn supported_range(feature: &str) -> Option<(i16, i16)> {
    supported()
        .into_iter()
        .find(|f| f.name == feature)
        .map(|f| (f.min, f.max))
}

/// The levels a new cluster (an empty metadata log) starts finalized at,
/// besides `skein.version` (the operator's `spec.featureLevel`).
pub fn new_cluster_levels() -> std::collections::BTreeMap<String, i16> {
    [
        (
            TRANSACTION_VERSION.to_string(),
            TRANSACTION_VERSION_NEW_CLUSTER,
        ),
        (SHARE_VERSION.to_string(), SHARE_VERSION_MAX),
        (STREAMS_VERSION.to_string(), STREAMS_VERSION_MAX),
    ]
    .into()
}

/// The other features a new cluster starts at, by its `skein.version`:
/// the newest levels (`transaction.version` 2, as Kafka 4.x formats a new
/// cluster) from level 3 on, which only releases that know them run at; at
/// an earlier level, which `spec.featureLevel` names for a cluster 0.1.0
/// must still run, none (`transaction.version` 0, which it runs at).
///
/// `share.version` 1 (share groups) and `streams.version` 1 come from `skein.version` 5 on, the
/// level of this release: a cluster started lower is meant for brokers of
/// an earlier release too, which do not know share groups (it is finalized
/// later with `kafka-features upgrade --feature share.version=1`).
pub fn new_cluster_features(skein_level: i16) -> std::collections::BTreeMap<String, i16> {
    let mut levels = if skein_level >= SEALED_CREDENTIALS_LEVEL {
        new_cluster_levels()
    } else {
        Default::default()
    };
    if skein_level < CONFIG_RESOURCES_LEVEL {
        levels.remove(SHARE_VERSION);
        levels.remove(STREAMS_VERSION);
    }
    levels
}
