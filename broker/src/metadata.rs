//! Cluster metadata as this broker knows it: topics (ids, partitions, replica
//! assignment, leaders, configs), the cluster id and the producer-id counter.
//!
//! A single broker is its own controller (Kafka's combined mode): this store
//! runs the controller core and keeps its image in
//! `<data-dir>/cluster-metadata.json`, written atomically (write, fsync,
//! rename, fsync the directory) so a crash leaves either the old or the new
//! image, never a torn one.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use kafka_protocol::error::ResponseError;
use serde::{Deserialize, Serialize};
use skein_controller::{
    Command, ControllerConfig, ControllerCore, ControllerError, Event, MetadataImage, NewTopic,
    Reply, TopicId,
};
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

/// What handlers read: a snapshot of the cluster as this broker knows it.
#[derive(Debug, Clone, Default)]
pub struct ClusterImage {
    pub cluster_id: String,
    pub topics: BTreeMap<String, TopicMeta>,
}

/// The file this broker keeps its metadata in (combined mode).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct PersistedMetadata {
    cluster_id: String,
    image: MetadataImage,
}

/// The embedded controller and the producer-id block in use.
struct Inner {
    core: ControllerCore,
    cluster_id: String,
    /// Next id to hand out and the end (exclusive) of the current block.
    producer_ids: (i64, i64),
}

/// Thread-safe, persisted metadata for this broker. A single broker is its
/// own controller (Kafka's combined mode): it runs the controller core in
/// process and keeps the core's image in `<data-dir>/cluster-metadata.json`.
pub struct MetadataStore {
    path: PathBuf,
    node_id: i32,
    inner: Mutex<Inner>,
    view: RwLock<Arc<ClusterImage>>,
}

fn controller_error(e: ControllerError) -> ApiError {
    let code =
        ResponseError::try_from_code(e.kafka_code()).unwrap_or(ResponseError::UnknownServerError);
    ApiError::new(code, e.to_string())
}

/// Milliseconds for the controller core (it only compares them).
fn core_now() -> u64 {
    crate::broker::now_ms().max(0) as u64
}

impl MetadataStore {
    /// Opens (or initialises) the metadata under `data_dir` and registers
    /// this broker with the embedded controller, which re-elects it leader
    /// of its partitions at a new leader epoch.
    pub fn open(
        data_dir: &Path,
        node_id: i32,
        host: &str,
        port: u16,
        rack: Option<String>,
    ) -> std::io::Result<Self> {
        std::fs::create_dir_all(data_dir)?;
        let path = data_dir.join("cluster-metadata.json");
        let invalid = |e: String| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("{}: {e}", path.display()),
            )
        };
        let (core, cluster_id) = match std::fs::read(&path) {
            Ok(bytes) => {
                let p: PersistedMetadata =
                    serde_json::from_slice(&bytes).map_err(|e| invalid(e.to_string()))?;
                let core = ControllerCore::from_image(p.image, ControllerConfig::default())
                    .map_err(|e| invalid(e.to_string()))?;
                (core, p.cluster_id)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => (
                ControllerCore::new(ControllerConfig::default()),
                new_cluster_id(),
            ),
            Err(e) => return Err(e),
        };
        let store = Self {
            path,
            node_id,
            inner: Mutex::new(Inner {
                core,
                cluster_id,
                producer_ids: (0, 0),
            }),
            view: RwLock::new(Arc::new(ClusterImage::default())),
        };
        store
            .apply(
                Event::BrokerRegistered {
                    broker: node_id,
                    host: host.to_string(),
                    port,
                    rack,
                },
                |r| match r {
                    Reply::BrokerRegistered { result, .. } => Some(result.map(|_| ())),
                    _ => None,
                },
            )
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        Ok(store)
    }

    /// Runs one event through the controller core, persists the new image
    /// before anyone sees it, refreshes the view, and returns the reply
    /// `pick` selects.
    fn apply<T>(
        &self,
        event: Event,
        pick: impl Fn(Reply) -> Option<Result<T, ControllerError>>,
    ) -> Result<T, ApiError> {
        let mut inner = self.inner.lock().expect("metadata lock");
        let commands = inner.core.handle(event, core_now());
        let mut reply = None;
        let mut persist = false;
        for c in commands {
            match c {
                Command::PersistBroker(_)
                | Command::PersistTopic(_)
                | Command::PersistPartition { .. }
                | Command::DeleteTopic { .. }
                | Command::PersistCluster(_) => persist = true,
                Command::UncleanLeaderElection {
                    topic,
                    partition,
                    leader,
                    ..
                } => {
                    tracing::warn!(topic, partition, leader, "unclean leader election");
                }
                Command::Reply(r) if reply.is_none() => reply = pick(r),
                // One broker leads everything it hosts; the view built below
                // carries the leader epochs the replica manager applies.
                _ => {}
            }
        }
        if persist {
            let bytes = serde_json::to_vec_pretty(&PersistedMetadata {
                cluster_id: inner.cluster_id.clone(),
                image: inner.core.image().clone(),
            })
            .expect("serializable");
            write_atomic(&self.path, &bytes).map_err(|e| {
                ApiError::new(
                    ResponseError::KafkaStorageError,
                    format!("cannot persist metadata: {e}"),
                )
            })?;
        }
        *self.view.write().expect("view lock") = Arc::new(build_view(&inner));
        match reply {
            Some(r) => r.map_err(controller_error),
            None => Err(ApiError::new(
                ResponseError::UnknownServerError,
                "the controller gave no answer",
            )),
        }
    }

    /// A consistent snapshot of the whole image.
    pub fn image(&self) -> Arc<ClusterImage> {
        self.view.read().expect("view lock").clone()
    }

    pub fn topic(&self, name: &str) -> Option<TopicMeta> {
        self.image().topics.get(name).cloned()
    }

    pub fn topic_by_id(&self, id: Uuid) -> Option<TopicMeta> {
        self.image().topics.values().find(|t| t.id == id).cloned()
    }

    fn unknown(name: &str) -> ApiError {
        ApiError::new(
            ResponseError::UnknownTopicOrPartition,
            format!("topic '{name}' does not exist"),
        )
    }

    /// Creates a topic; the controller core places its replicas.
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
        if replication_factor < 1 {
            return Err(ApiError::new(
                ResponseError::InvalidReplicationFactor,
                format!("replication factor must be at least 1, got {replication_factor}"),
            ));
        }
        if let Some(other) = self.image().topics.keys().find(|t| collides(t, name)) {
            return Err(ApiError::new(
                ResponseError::InvalidTopicException,
                format!("topic '{name}' collides with existing topic '{other}' ('.' and '_' are interchangeable in metric names)"),
            ));
        }
        let mut t = NewTopic::new(
            name,
            TopicId(Uuid::new_v4().as_u128()),
            partitions as u32,
            replication_factor as u16,
        );
        t.configs = configs;
        self.apply(Event::CreateTopic(t), |r| match r {
            Reply::CreateTopic { result, .. } => Some(result.map(|_| ())),
            _ => None,
        })?;
        self.topic(name).ok_or_else(|| Self::unknown(name))
    }

    /// Removes a topic from the image (its logs are deleted by the caller).
    pub fn delete_topic(&self, name: &str) -> Result<TopicMeta, ApiError> {
        let meta = self.topic(name).ok_or_else(|| Self::unknown(name))?;
        self.apply(
            Event::DeleteTopic {
                topic: name.to_string(),
            },
            |r| match r {
                Reply::DeleteTopic { result, .. } => Some(result),
                _ => None,
            },
        )?;
        Ok(meta)
    }

    /// Grows a topic to `count` partitions.
    pub fn create_partitions(&self, name: &str, count: i32) -> Result<TopicMeta, ApiError> {
        let current = self
            .topic(name)
            .ok_or_else(|| Self::unknown(name))?
            .partitions
            .len() as i32;
        if count <= current {
            return Err(ApiError::new(
                ResponseError::InvalidPartitions,
                format!("topic '{name}' has {current} partitions; the count can only grow, {count} asked"),
            ));
        }
        self.apply(
            Event::CreatePartitions {
                topic: name.to_string(),
                count: count as u32,
                assignment: None,
            },
            |r| match r {
                Reply::CreatePartitions { result, .. } => Some(result),
                _ => None,
            },
        )?;
        self.topic(name).ok_or_else(|| Self::unknown(name))
    }

    /// Replaces a topic's configs.
    pub fn set_topic_configs(
        &self,
        name: &str,
        configs: BTreeMap<String, String>,
    ) -> Result<TopicMeta, ApiError> {
        if self.topic(name).is_none() {
            return Err(Self::unknown(name));
        }
        self.apply(
            Event::TopicConfigChanged {
                topic: name.to_string(),
                configs,
            },
            |r| match r {
                Reply::AlterConfigs { result, .. } => Some(result),
                _ => None,
            },
        )?;
        self.topic(name).ok_or_else(|| Self::unknown(name))
    }

    /// Hands out the next producer id from a block the controller allocated
    /// (blocks are persisted, so ids are never reused across restarts).
    pub fn allocate_producer_id(&self) -> Result<i64, ApiError> {
        let epoch = {
            let mut inner = self.inner.lock().expect("metadata lock");
            let (next, end) = inner.producer_ids;
            if next < end {
                inner.producer_ids.0 += 1;
                return Ok(next);
            }
            inner
                .core
                .broker(self.node_id)
                .map(|b| b.broker_epoch)
                .unwrap_or(0)
        };
        let block = self.apply(
            Event::AllocateProducerIds {
                broker: self.node_id,
                broker_epoch: epoch,
            },
            |r| match r {
                Reply::AllocateProducerIds { result, .. } => Some(result),
                _ => None,
            },
        )?;
        let mut inner = self.inner.lock().expect("metadata lock");
        inner.producer_ids = (block.first_producer_id + 1, block.last_producer_id() + 1);
        Ok(block.first_producer_id)
    }
}

/// The handlers' view of the controller's image.
fn build_view(inner: &Inner) -> ClusterImage {
    let topics = inner
        .core
        .topics()
        .iter()
        .map(|(name, t)| {
            let meta = TopicMeta {
                name: name.clone(),
                id: Uuid::from_u128(t.spec.topic_id.0),
                partitions: t
                    .partitions
                    .iter()
                    .map(|p| PartitionMeta {
                        replicas: p.replicas.clone(),
                        isr: p.isr.clone(),
                        leader: p.leader,
                        leader_epoch: p.leader_epoch,
                    })
                    .collect(),
                configs: t.spec.configs.clone(),
            };
            (name.clone(), meta)
        })
        .collect();
    ClusterImage {
        cluster_id: inner.cluster_id.clone(),
        topics,
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
        let store = MetadataStore::open(dir.path(), 1, "127.0.0.1", 9092, None).unwrap();
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
        let store = MetadataStore::open(dir.path(), 1, "127.0.0.1", 9092, None).unwrap();
        assert_eq!(store.topic("a").unwrap().partitions.len(), 5);
        // The embedded controller re-elects this broker, at a newer leader epoch.
        for (before, after) in t
            .partitions
            .iter()
            .zip(&store.topic("a").unwrap().partitions)
        {
            assert_eq!(after.leader, 1);
            assert_eq!(after.isr, vec![1]);
            assert!(after.leader_epoch > before.leader_epoch);
        }
        assert_eq!(store.topic("a").unwrap().id, t.id);
        assert_eq!(store.image().cluster_id, cluster_id);
        assert!(store.allocate_producer_id().unwrap() > pid);
    }

    #[test]
    fn colliding_names_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store = MetadataStore::open(dir.path(), 1, "127.0.0.1", 9092, None).unwrap();
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
