//! The partitions this broker hosts (Kafka's `ReplicaManager`): opening their
//! logs at start-up, creating and deleting them as topics change, and the
//! background work on every log (retention, compaction, flush, roll).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use kafka_protocol::error::ResponseError;
use skein_storage::{Log, LogConfig};
use tracing::{info, warn};

use crate::error::ApiError;
use crate::metadata::TopicMeta;
use crate::partition::Partition;

/// Key of a hosted partition.
pub type TopicPartition = (String, i32);

/// Every partition replica on this broker.
pub struct ReplicaManager {
    data_dir: PathBuf,
    partitions: RwLock<HashMap<TopicPartition, Arc<Partition>>>,
}

impl ReplicaManager {
    pub fn new(data_dir: &Path) -> Self {
        Self {
            data_dir: data_dir.to_path_buf(),
            partitions: RwLock::new(HashMap::new()),
        }
    }

    pub fn get(&self, topic: &str, partition: i32) -> Option<Arc<Partition>> {
        self.partitions
            .read()
            .expect("partitions lock")
            .get(&(topic.to_string(), partition))
            .cloned()
    }

    /// The partition, or the Kafka error a client should see when it is not here.
    pub fn get_or_err(&self, topic: &str, partition: i32) -> Result<Arc<Partition>, ApiError> {
        self.get(topic, partition).ok_or_else(|| {
            ApiError::new(
                ResponseError::UnknownTopicOrPartition,
                format!("this broker does not host {topic}-{partition}"),
            )
        })
    }

    pub fn all(&self) -> Vec<Arc<Partition>> {
        self.partitions
            .read()
            .expect("partitions lock")
            .values()
            .cloned()
            .collect()
    }

    /// Opens (recovering if needed) every partition of `topic` that is missing.
    pub fn ensure_topic(
        &self,
        topic: &TopicMeta,
        config: &LogConfig,
        now_ms: i64,
    ) -> Result<(), ApiError> {
        for (index, p) in topic.partitions.iter().enumerate() {
            let index = index as i32;
            if self.get(&topic.name, index).is_some() {
                continue;
            }
            let dir = self.data_dir.join(Partition::dir_name(&topic.name, index));
            let log = Log::open(&dir, config.clone(), now_ms)?;
            let part = Arc::new(Partition::new(
                &topic.name,
                index,
                topic.id,
                p.leader_epoch,
                log,
            ));
            self.partitions
                .write()
                .expect("partitions lock")
                .insert((topic.name.clone(), index), part);
        }
        Ok(())
    }

    /// Applies new topic configs to every open log of `topic`.
    pub fn update_topic_config(&self, topic: &str, config: &LogConfig) {
        for p in self.all().into_iter().filter(|p| p.topic == topic) {
            p.update_config(config.clone());
        }
    }

    /// Stops hosting `topic` and removes its data from disk.
    pub fn delete_topic(&self, topic: &str) {
        let removed: Vec<Arc<Partition>> = {
            let mut map = self.partitions.write().expect("partitions lock");
            let keys: Vec<TopicPartition> =
                map.keys().filter(|(t, _)| t == topic).cloned().collect();
            keys.iter().filter_map(|k| map.remove(k)).collect()
        };
        for p in removed {
            let dir = p.with_log(|l| l.dir().to_path_buf());
            // Readers still holding the partition keep their open files;
            // removing the directory is safe underneath them.
            if let Err(e) = std::fs::remove_dir_all(&dir) {
                warn!(dir = %dir.display(), error = %e, "cannot remove deleted partition's data");
            }
        }
    }

    /// Removes partition directories that no topic in the metadata owns, e.g.
    /// left by a crash between deleting a topic and deleting its data.
    pub fn remove_orphans(&self, topics: &std::collections::BTreeMap<String, TopicMeta>) {
        let Ok(entries) = std::fs::read_dir(&self.data_dir) else {
            return;
        };
        for e in entries.flatten() {
            if !e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                continue;
            }
            let name = e.file_name().to_string_lossy().to_string();
            let Some((topic, part)) = name.rsplit_once('-') else {
                continue;
            };
            let Ok(part) = part.parse::<usize>() else {
                continue;
            };
            let owned = topics
                .get(topic)
                .map(|t| part < t.partitions.len())
                .unwrap_or(false);
            if !owned {
                info!(dir = %name, "removing data of a deleted partition");
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }

    /// One pass of background log maintenance. Blocking file I/O: run it on
    /// a blocking thread.
    pub fn maintain(
        &self,
        now_ms: i64,
        retention: bool,
        compaction: bool,
        producer_expiration_ms: i64,
    ) {
        for p in self.all() {
            p.with_log_mut(|log| {
                log.expire_producers(now_ms, producer_expiration_ms);
                if let Err(e) = log.maybe_roll(now_ms) {
                    warn!(topic = %p.topic, partition = p.index, error = %e, "roll failed");
                }
                if let Err(e) = log.maybe_flush(now_ms) {
                    warn!(topic = %p.topic, partition = p.index, error = %e, "flush failed");
                }
                if retention && log.config().cleanup_policy.delete {
                    match log.enforce_retention(now_ms) {
                        Ok(n) if n > 0 => {
                            info!(topic = %p.topic, partition = p.index, segments = n, "retention deleted segments")
                        }
                        Ok(_) => {}
                        Err(e) => warn!(topic = %p.topic, partition = p.index, error = %e, "retention failed"),
                    }
                }
                if compaction && log.config().cleanup_policy.compact {
                    match log.compact(now_ms) {
                        Ok(s) if s.segments_cleaned > 0 => info!(
                            topic = %p.topic,
                            partition = p.index,
                            segments = s.segments_cleaned,
                            removed = s.records_removed,
                            "compacted"
                        ),
                        Ok(_) => {}
                        Err(e) => warn!(topic = %p.topic, partition = p.index, error = %e, "compaction failed"),
                    }
                }
            });
        }
    }

    /// Flushes and closes every log (clean shutdown).
    pub fn shutdown(&self) {
        let parts: Vec<Arc<Partition>> = {
            let mut map = self.partitions.write().expect("partitions lock");
            map.drain().map(|(_, p)| p).collect()
        };
        for p in parts {
            let name = format!("{}-{}", p.topic, p.index);
            match Arc::try_unwrap(p) {
                Ok(p) => {
                    if let Err(e) = p.close() {
                        warn!(partition = %name, error = %e, "close failed");
                    }
                }
                Err(p) => {
                    if let Err(e) = p.with_log_mut(|l| l.flush()) {
                        warn!(partition = %name, error = %e, "flush failed");
                    }
                }
            }
        }
    }
}
