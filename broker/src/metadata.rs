//! Cluster metadata as this broker knows it: topics (ids, partitions, replica
//! assignment, leaders, configs), the cluster id and the producer-id counter.
//!
//! A single broker is its own controller (Kafka's combined mode): this store
//! keeps the metadata image in `<data-dir>/cluster-metadata.json`, written
//! atomically (write, fsync, rename, fsync the directory) so a crash leaves
//! either the old or the new image, never a torn one.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use kafka_protocol::error::ResponseError;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::error::ApiError;

/// Name of the internal topic that stores group metadata and committed offsets.
pub const CONSUMER_OFFSETS: &str = "__consumer_offsets";

/// One partition's replica assignment and leadership.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PartitionMeta {
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    pub leader: i32,
    pub leader_epoch: i32,
}

/// One topic.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TopicMeta {
    pub name: String,
    pub id: Uuid,
    pub partitions: Vec<PartitionMeta>,
    pub configs: BTreeMap<String, String>,
}

impl TopicMeta {
    /// Whether this is one of Kafka's internal topics.
    pub fn is_internal(&self) -> bool {
        self.name == CONSUMER_OFFSETS || self.name == "__transaction_state"
    }
    pub fn replication_factor(&self) -> i16 {
        self.partitions
            .first()
            .map(|p| p.replicas.len() as i16)
            .unwrap_or(1)
    }
}

/// The persisted metadata image.
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
pub struct ClusterImage {
    pub cluster_id: String,
    pub topics: BTreeMap<String, TopicMeta>,
    pub next_producer_id: i64,
}

/// Thread-safe, persisted metadata for this broker.
pub struct MetadataStore {
    path: PathBuf,
    node_id: i32,
    image: RwLock<Arc<ClusterImage>>,
}

impl MetadataStore {
    /// Opens (or initialises) the metadata image under `data_dir`.
    pub fn open(data_dir: &Path, node_id: i32) -> std::io::Result<Self> {
        std::fs::create_dir_all(data_dir)?;
        let path = data_dir.join("cluster-metadata.json");
        let image = match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("{}: {e}", path.display()),
                )
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let img = ClusterImage {
                    cluster_id: new_cluster_id(),
                    topics: BTreeMap::new(),
                    next_producer_id: 0,
                };
                write_atomic(
                    &path,
                    &serde_json::to_vec_pretty(&img).expect("serializable"),
                )?;
                img
            }
            Err(e) => return Err(e),
        };
        Ok(Self {
            path,
            node_id,
            image: RwLock::new(Arc::new(image)),
        })
    }

    /// A consistent snapshot of the whole image.
    pub fn image(&self) -> Arc<ClusterImage> {
        self.image.read().expect("metadata lock").clone()
    }

    pub fn topic(&self, name: &str) -> Option<TopicMeta> {
        self.image().topics.get(name).cloned()
    }

    pub fn topic_by_id(&self, id: Uuid) -> Option<TopicMeta> {
        self.image().topics.values().find(|t| t.id == id).cloned()
    }

    /// Applies `f` to a copy of the image and persists the result before
    /// publishing it, so readers never see state that is not on disk.
    fn update<T>(
        &self,
        f: impl FnOnce(&mut ClusterImage) -> Result<T, ApiError>,
    ) -> Result<T, ApiError> {
        let mut guard = self.image.write().expect("metadata lock");
        let mut next = (**guard).clone();
        let out = f(&mut next)?;
        let bytes = serde_json::to_vec_pretty(&next).expect("serializable");
        write_atomic(&self.path, &bytes).map_err(|e| {
            ApiError::new(
                ResponseError::KafkaStorageError,
                format!("cannot persist metadata: {e}"),
            )
        })?;
        *guard = Arc::new(next);
        Ok(out)
    }

    /// Creates a topic led by this broker (single node: RF must be 1).
    pub fn create_topic(
        &self,
        name: &str,
        partitions: i32,
        replication_factor: i16,
        configs: BTreeMap<String, String>,
    ) -> Result<TopicMeta, ApiError> {
        validate_topic_name(name)?;
        if partitions < 1 {
            return Err(ApiError::new(
                ResponseError::InvalidPartitions,
                format!("number of partitions must be at least 1, got {partitions}"),
            ));
        }
        if replication_factor != 1 {
            return Err(ApiError::new(
                ResponseError::InvalidReplicationFactor,
                format!(
                    "replication factor {replication_factor} is not possible with 1 available broker"
                ),
            ));
        }
        let node = self.node_id;
        self.update(|img| {
            if img.topics.contains_key(name) {
                return Err(ApiError::new(
                    ResponseError::TopicAlreadyExists,
                    format!("topic '{name}' already exists"),
                ));
            }
            if let Some(other) = img.topics.keys().find(|t| collides(t, name)) {
                return Err(ApiError::new(
                    ResponseError::InvalidTopicException,
                    format!("topic '{name}' collides with existing topic '{other}' ('.' and '_' are interchangeable in metric names)"),
                ));
            }
            let t = TopicMeta {
                name: name.to_string(),
                id: Uuid::new_v4(),
                partitions: (0..partitions).map(|_| single_node_partition(node)).collect(),
                configs,
            };
            img.topics.insert(name.to_string(), t.clone());
            Ok(t)
        })
    }

    /// Removes a topic from the image (its logs are deleted by the caller).
    pub fn delete_topic(&self, name: &str) -> Result<TopicMeta, ApiError> {
        self.update(|img| {
            img.topics.remove(name).ok_or_else(|| {
                ApiError::new(
                    ResponseError::UnknownTopicOrPartition,
                    format!("topic '{name}' does not exist"),
                )
            })
        })
    }

    /// Grows a topic to `count` partitions.
    pub fn create_partitions(&self, name: &str, count: i32) -> Result<TopicMeta, ApiError> {
        let node = self.node_id;
        self.update(|img| {
            let t = img.topics.get_mut(name).ok_or_else(|| {
                ApiError::new(
                    ResponseError::UnknownTopicOrPartition,
                    format!("topic '{name}' does not exist"),
                )
            })?;
            let current = t.partitions.len() as i32;
            if count <= current {
                return Err(ApiError::new(
                    ResponseError::InvalidPartitions,
                    format!("topic '{name}' has {current} partitions; the count can only grow, {count} asked"),
                ));
            }
            while (t.partitions.len() as i32) < count {
                t.partitions.push(single_node_partition(node));
            }
            Ok(t.clone())
        })
    }

    /// Replaces a topic's configs.
    pub fn set_topic_configs(
        &self,
        name: &str,
        configs: BTreeMap<String, String>,
    ) -> Result<TopicMeta, ApiError> {
        self.update(|img| {
            let t = img.topics.get_mut(name).ok_or_else(|| {
                ApiError::new(
                    ResponseError::UnknownTopicOrPartition,
                    format!("topic '{name}' does not exist"),
                )
            })?;
            t.configs = configs;
            Ok(t.clone())
        })
    }

    /// Hands out the next producer id (persisted before it is returned).
    pub fn allocate_producer_id(&self) -> Result<i64, ApiError> {
        self.update(|img| {
            let id = img.next_producer_id;
            img.next_producer_id += 1;
            Ok(id)
        })
    }
}

fn single_node_partition(node: i32) -> PartitionMeta {
    PartitionMeta {
        replicas: vec![node],
        isr: vec![node],
        leader: node,
        leader_epoch: 0,
    }
}

/// Two topic names collide if they differ only by '.' versus '_' (Kafka rule).
fn collides(a: &str, b: &str) -> bool {
    a != b && a.replace('.', "_") == b.replace('.', "_")
}

/// Kafka's topic-name rules: 1–249 characters of `[a-zA-Z0-9._-]`, not `.` or `..`.
pub fn validate_topic_name(name: &str) -> Result<(), ApiError> {
    let bad = |why: String| Err(ApiError::new(ResponseError::InvalidTopicException, why));
    if name.is_empty() {
        return bad("topic name is empty".into());
    }
    if name == "." || name == ".." {
        return bad(format!("topic name cannot be '{name}'"));
    }
    if name.len() > 249 {
        return bad(format!(
            "topic name is {} characters long; the limit is 249",
            name.len()
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return bad(format!(
            "topic name '{name}' contains '{c}'; allowed are ASCII letters, digits, '.', '_' and '-'"
        ));
    }
    Ok(())
}

fn new_cluster_id() -> String {
    // Kafka cluster ids are 16 random bytes in URL-safe base64 without padding.
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let bytes = Uuid::new_v4().into_bytes();
    let mut out = String::with_capacity(22);
    let mut acc: u32 = 0;
    let mut bits = 0;
    for b in bytes {
        acc = (acc << 8) | b as u32;
        bits += 8;
        while bits >= 6 {
            bits -= 6;
            out.push(ALPHABET[((acc >> bits) & 63) as usize] as char);
        }
    }
    if bits > 0 {
        out.push(ALPHABET[((acc << (6 - bits)) & 63) as usize] as char);
    }
    out
}

/// Writes `bytes` to `path` so that a crash leaves the old or the new file.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let tmp = path.with_extension("tmp");
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent() {
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_names_follow_kafka_rules() {
        assert!(validate_topic_name("orders.v1_a-b").is_ok());
        for bad in ["", ".", "..", "a b", "ünï", "x/y"] {
            assert_eq!(
                validate_topic_name(bad).unwrap_err().code,
                ResponseError::InvalidTopicException,
                "{bad}"
            );
        }
        assert!(validate_topic_name(&"a".repeat(249)).is_ok());
        assert!(validate_topic_name(&"a".repeat(250)).is_err());
    }

    #[test]
    fn metadata_survives_reopen_and_rejects_duplicates() {
        let dir = tempfile::tempdir().unwrap();
        let store = MetadataStore::open(dir.path(), 1).unwrap();
        let t = store.create_topic("a", 3, 1, BTreeMap::new()).unwrap();
        assert_eq!(t.partitions.len(), 3);
        assert_eq!(
            store
                .create_topic("a", 1, 1, BTreeMap::new())
                .unwrap_err()
                .code,
            ResponseError::TopicAlreadyExists
        );
        assert_eq!(
            store
                .create_topic("b", 1, 3, BTreeMap::new())
                .unwrap_err()
                .code,
            ResponseError::InvalidReplicationFactor
        );
        assert_eq!(
            store.create_partitions("a", 2).unwrap_err().code,
            ResponseError::InvalidPartitions
        );
        store.create_partitions("a", 5).unwrap();
        let pid = store.allocate_producer_id().unwrap();
        let cluster_id = store.image().cluster_id.clone();
        assert_eq!(cluster_id.len(), 22);
        drop(store);
        let store = MetadataStore::open(dir.path(), 1).unwrap();
        assert_eq!(store.topic("a").unwrap().partitions.len(), 5);
        assert_eq!(store.topic("a").unwrap().id, t.id);
        assert_eq!(store.image().cluster_id, cluster_id);
        assert_eq!(store.allocate_producer_id().unwrap(), pid + 1);
    }

    #[test]
    fn colliding_names_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store = MetadataStore::open(dir.path(), 1).unwrap();
        store.create_topic("a.b", 1, 1, BTreeMap::new()).unwrap();
        assert_eq!(
            store
                .create_topic("a_b", 1, 1, BTreeMap::new())
                .unwrap_err()
                .code,
            ResponseError::InvalidTopicException
        );
    }
}
