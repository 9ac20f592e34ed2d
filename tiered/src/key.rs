//! Object names (docs/tiered-storage.md, "Where the remote metadata lives"):
//!
//! ```text
//! <prefix>/<topic>-<topic id>/<partition>/<20-digit base offset>-<uuid>.{log,index,timeindex,txnindex,snapshot,epochs}
//! <prefix>/<topic>-<topic id>/<partition>/manifest/<leader epoch, 10 digits>.json
//! ```
//!
//! The topic id is in the name so a topic deleted and created again under
//! the same name never meets the old one's objects; the uuid per copy keeps
//! a half-written or repeated copy from replacing a complete one.

use object_store::path::Path;
use uuid::Uuid;

/// One partition of one topic, as its objects are named.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PartitionKey {
    /// The topic's name.
    pub topic: String,
    /// The topic's id (names the objects together with the name).
    pub topic_id: Uuid,
    /// The partition index.
    pub partition: i32,
}

impl PartitionKey {
    /// A key for `topic`/`partition` with the topic's id.
    pub fn new(topic: impl Into<String>, topic_id: Uuid, partition: i32) -> Self {
        PartitionKey {
            topic: topic.into(),
            topic_id,
            partition,
        }
    }

    /// `<topic>-<partition>-<topic id>`: the partition's folder in the local
    /// read cache (Kafka's log directory name plus the id).
    pub fn cache_dir_name(&self) -> String {
        format!("{}-{}-{}", self.topic, self.partition, self.topic_id)
    }
}

impl std::fmt::Display for PartitionKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{} ({})", self.topic, self.partition, self.topic_id)
    }
}

/// The objects one copied segment is made of.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ObjectKind {
    /// The record batches (`.log`).
    Log,
    /// The sparse offset index (`.index`).
    OffsetIndex,
    /// The sparse time index (`.timeindex`).
    TimeIndex,
    /// The aborted-transaction index (`.txnindex`); absent when empty.
    TxnIndex,
    /// The producer-state snapshot at the next segment's base (`.snapshot`).
    ProducerSnapshot,
    /// The leader-epoch checkpoint up to the next segment's base (`.epochs`).
    LeaderEpochs,
}

impl ObjectKind {
    /// Every kind, the `.log` last (the order objects are uploaded in).
    pub const ALL: [ObjectKind; 6] = [
        ObjectKind::OffsetIndex,
        ObjectKind::TimeIndex,
        ObjectKind::TxnIndex,
        ObjectKind::ProducerSnapshot,
        ObjectKind::LeaderEpochs,
        ObjectKind::Log,
    ];

    /// The file-name suffix, without the dot.
    pub fn suffix(self) -> &'static str {
        match self {
            ObjectKind::Log => "log",
            ObjectKind::OffsetIndex => "index",
            ObjectKind::TimeIndex => "timeindex",
            ObjectKind::TxnIndex => "txnindex",
            ObjectKind::ProducerSnapshot => "snapshot",
            ObjectKind::LeaderEpochs => "epochs",
        }
    }

    /// The kind a suffix names.
    pub fn from_suffix(suffix: &str) -> Option<ObjectKind> {
        ObjectKind::ALL.into_iter().find(|k| k.suffix() == suffix)
    }
}

/// `<20-digit base offset>.<suffix>`: the local file name of a segment's
/// file, as the partition log names it.
pub fn local_file_name(base_offset: i64, kind: ObjectKind) -> String {
    format!("{base_offset:020}.{}", kind.suffix())
}

/// Builds the keys of one store (its prefix applied).
#[derive(Clone, Debug, Default)]
pub(crate) struct KeyLayout {
    /// The prefix every key starts with, without slashes at either end.
    prefix: String,
}

impl KeyLayout {
    /// A layout under `prefix` (slashes at either end are ignored).
    pub(crate) fn new(prefix: &str) -> Self {
        KeyLayout {
            prefix: prefix.trim_matches('/').to_string(),
        }
    }

    fn join(&self, rest: String) -> Path {
        if self.prefix.is_empty() {
            Path::from(rest)
        } else {
            Path::from(format!("{}/{rest}", self.prefix))
        }
    }

    /// `<prefix>/<topic>-<topic id>/<partition>`.
    pub(crate) fn partition(&self, p: &PartitionKey) -> Path {
        self.join(format!("{}-{}/{}", p.topic, p.topic_id, p.partition))
    }

    /// `<partition>/manifest`.
    pub(crate) fn manifest_dir(&self, p: &PartitionKey) -> Path {
        self.partition(p).join("manifest")
    }

    /// `<partition>/manifest/<epoch, 10 digits>.json`.
    pub(crate) fn manifest(&self, p: &PartitionKey, leader_epoch: i32) -> Path {
        self.manifest_dir(p)
            .join(format!("{leader_epoch:010}.json"))
    }

    /// `<partition>/<20-digit base>-<uuid>.<suffix>`.
    pub(crate) fn segment_object(
        &self,
        p: &PartitionKey,
        base_offset: i64,
        id: Uuid,
        kind: ObjectKind,
    ) -> Path {
        self.partition(p)
            .join(format!("{base_offset:020}-{id}.{}", kind.suffix()))
    }
}

/// The leader epoch a manifest's file name gives (`<epoch>.json`).
pub(crate) fn parse_manifest_name(file_name: &str) -> Option<i32> {
    file_name.strip_suffix(".json")?.parse().ok()
}

/// A segment object's file name taken apart: base offset, uuid, kind.
pub(crate) fn parse_segment_object_name(file_name: &str) -> Option<(i64, Uuid, ObjectKind)> {
    let (stem, suffix) = file_name.rsplit_once('.')?;
    let kind = ObjectKind::from_suffix(suffix)?;
    let (base, id) = stem.split_once('-')?;
    if base.len() != 20 {
        return None;
    }
    Some((base.parse().ok()?, Uuid::parse_str(id).ok()?, kind))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> PartitionKey {
        PartitionKey::new("orders", Uuid::from_u128(0x1234), 3)
    }

    #[test]
    fn names_follow_the_design() {
        let layout = KeyLayout::new("/cluster-a/");
        let id = Uuid::from_u128(7);
        assert_eq!(
            layout
                .segment_object(&key(), 42, id, ObjectKind::TimeIndex)
                .as_ref(),
            format!(
                "cluster-a/orders-{}/3/00000000000000000042-{id}.timeindex",
                key().topic_id
            )
        );
        assert_eq!(
            layout.manifest(&key(), 5).as_ref(),
            format!(
                "cluster-a/orders-{}/3/manifest/0000000005.json",
                key().topic_id
            )
        );
        let bare = KeyLayout::new("");
        assert_eq!(
            bare.partition(&key()).as_ref(),
            format!("orders-{}/3", key().topic_id)
        );
    }

    #[test]
    fn names_parse_back() {
        let id = Uuid::from_u128(99);
        for kind in ObjectKind::ALL {
            let path = KeyLayout::new("x").segment_object(&key(), 1 << 40, id, kind);
            let name = path.filename().expect("a file name");
            assert_eq!(parse_segment_object_name(name), Some((1 << 40, id, kind)));
        }
        assert_eq!(parse_manifest_name("0000000012.json"), Some(12));
        assert_eq!(parse_manifest_name("0000000012.json.tmp"), None);
        assert_eq!(parse_segment_object_name("00000000000000000001.log"), None);
        assert_eq!(parse_segment_object_name("1-{id}.log"), None);
        assert_eq!(
            local_file_name(7, ObjectKind::OffsetIndex),
            "00000000000000000007.index"
        );
    }
}
