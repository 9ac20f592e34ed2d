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
//!
//! A release supports at least the previous release's highest level, so a
//! roll in either direction between neighbouring releases keeps working
//! while the cluster stays at that level (docs/upgrades.md). Fields a peer
//! may not know are optional on the wire (protobuf ignores unknown fields)
//! and defaulted in the metadata log (serde); a request kind a controller
//! does not know is answered `UNSUPPORTED_VERSION`, never dropped.

use crate::model::FeatureRange;

/// Skein's feature.
pub const SKEIN_VERSION: &str = "skein.version";
/// The lowest `skein.version` this release runs at.
pub const SKEIN_VERSION_MIN: i16 = 1;
/// The highest `skein.version` this release runs at.
pub const SKEIN_VERSION_MAX: i16 = 3;
/// From this level on, SCRAM credentials are sealed in a metadata store
/// that has a key (`store::seal`; the Kubernetes platform's ConfigMaps).
pub const SEALED_CREDENTIALS_LEVEL: i16 = 3;

/// The feature levels this release supports (what a broker registers).
pub fn supported() -> Vec<FeatureRange> {
    vec![FeatureRange {
        name: SKEIN_VERSION.into(),
        min: SKEIN_VERSION_MIN,
        max: SKEIN_VERSION_MAX,
    }]
}
