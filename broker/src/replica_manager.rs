//! The partitions this broker hosts (Kafka's `ReplicaManager`): opening
//! their logs when the controller assigns them, applying leader and follower
//! roles (starting and stopping replica fetchers), collecting the leaders'
//! ISR proposals, and the background work on every log (retention,
//! compaction, flush, roll).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use kafka_protocol::error::ResponseError;
use skein_storage::{Log, LogConfig};
use tokio::sync::mpsc;
use tracing::{debug, info, warn};

use crate::error::ApiError;
use crate::metadata::TopicView;
use crate::partition::{IsrProposal, Partition};
use crate::replication::fetcher::FetcherManager;

pub use crate::partition::TopicPartition;

/// Every partition replica on this broker.
pub struct ReplicaManager {
    data_dir: PathBuf,
    local_id: i32,
    partitions: RwLock<HashMap<TopicPartition, Arc<Partition>>>,
    fetchers: FetcherManager,
    /// ISR proposals of the partitions this broker leads, for the control
    /// layer to send to the controller.
    isr_proposals: mpsc::UnboundedSender<IsrProposal>,
    /// High watermarks read from `replication-offset-checkpoint` at start,
    /// handed to each partition when it is opened.
    hw_checkpoint: Mutex<HashMap<TopicPartition, i64>>,
    /// What was last written there, so an unchanged file is not rewritten.
    hw_written: Mutex<String>,
    /// Idempotent producers' batches refused lately (see `append`).
    pub(crate) refused_batches: Arc<crate::append::refused_batches::RefusedBatches>,
}

/// Kafka's file of every hosted partition's high watermark, in the data
/// directory. A broker that restarts serves what was committed before at
/// once, instead of waiting for its ISR to move the high watermark again
/// (which, below `min.insync.replicas`, it may not do for a long time).
pub const HW_CHECKPOINT_FILE: &str = "replication-offset-checkpoint";

/// Parses Kafka's checkpoint format: a version line `0`, a count, then
/// `topic partition offset` lines. A bad file is ignored (it costs
/// availability after a restart, never correctness).
pub fn parse_hw_checkpoint(text: &str) -> HashMap<TopicPartition, i64> {
    let mut lines = text.lines();
    if lines.next().map(str::trim) != Some("0") {
        return HashMap::new();
    }
    let Some(count) = lines.next().and_then(|l| l.trim().parse::<usize>().ok()) else {
        return HashMap::new();
    };
    let entries: HashMap<TopicPartition, i64> = lines
        .filter_map(|l| {
            let mut parts = l.split_whitespace();
            let topic = parts.next()?.to_string();
            let partition = parts.next()?.parse().ok()?;
            let hw = parts.next()?.parse().ok()?;
            Some(((topic, partition), hw))
        })
        .collect();
    if entries.len() == count {
        entries
    } else {
        HashMap::new()
    }
}

impl ReplicaManager {
    pub fn new(
        data_dir: &Path,
        local_id: i32,
        fetchers: FetcherManager,
        isr_proposals: mpsc::UnboundedSender<IsrProposal>,
    ) -> Self {
        Self {
            data_dir: data_dir.to_path_buf(),
            local_id,
            partitions: RwLock::new(HashMap::new()),
            fetchers,
            isr_proposals,
            hw_checkpoint: Mutex::new(
                std::fs::read_to_string(data_dir.join(HW_CHECKPOINT_FILE))
                    .map(|t| parse_hw_checkpoint(&t))
                    .unwrap_or_default(),
            ),
            hw_written: Mutex::new(String::new()),
            refused_batches: Default::default(),
        }
    }

    /// Writes every hosted partition's high watermark to
    /// `replication-offset-checkpoint` (write, fsync, rename) if it changed.
    pub fn checkpoint_high_watermarks(&self) {
        let mut entries: Vec<(String, i32, i64)> = self
            .all()
            .iter()
            .map(|p| (p.topic.clone(), p.index, p.high_watermark()))
            .collect();
        entries.sort();
        let mut text = format!("0\n{}\n", entries.len());
        for (t, p, hw) in &entries {
            text.push_str(&format!("{t} {p} {hw}\n"));
        }
        let mut written = self.hw_written.lock().expect("hw checkpoint lock");
        if *written == text {
            return;
        }
        match skein_storage::write_atomic(&self.data_dir.join(HW_CHECKPOINT_FILE), text.as_bytes())
        {
            Ok(()) => *written = text,
            Err(e) => warn!(error = %e, "writing {HW_CHECKPOINT_FILE} failed"),
        }
    }

    pub fn get(&self, topic: &str, partition: i32) -> Option<Arc<Partition>> {
        self.partitions
            .read()
            .expect("partitions lock")
            .get(&(topic.to_string(), partition))
            .cloned()
    }

    /// The replicas of many partitions under one lock, without a key
    /// allocated per partition (a follower's fetch names tens of thousands,
    /// grouped by topic).
    pub fn get_many<'a>(
        &self,
        wanted: impl IntoIterator<Item = (&'a str, i32)>,
    ) -> Vec<Option<Arc<Partition>>> {
        let partitions = self.partitions.read().expect("partitions lock");
        let mut key = (String::new(), 0);
        wanted
            .into_iter()
            .map(|(topic, partition)| {
                if key.0 != topic {
                    key.0.clear();
                    key.0.push_str(topic);
                }
                key.1 = partition;
                partitions.get(&key).cloned()
            })
            .collect()
    }

    /// The partition, or the Kafka error a client should see when it is not here.
    pub fn get_or_err(&self, topic: &str, partition: i32) -> Result<Arc<Partition>, ApiError> {
        self.get(topic, partition)
            .ok_or_else(|| not_hosted(topic, partition))
    }

    pub fn all(&self) -> Vec<Arc<Partition>> {
        self.partitions
            .read()
            .expect("partitions lock")
            .values()
            .cloned()
            .collect()
    }

    /// The replica of partition `index` of `topic`, opening (recovering)
    /// its log if this broker does not host it yet. A replica left from an
    /// earlier topic of the same name is deleted first.
    pub fn open_partition(
        &self,
        topic: &TopicView,
        index: i32,
        config: &LogConfig,
        now_ms: i64,
    ) -> Result<Arc<Partition>, ApiError> {
        if let Some(p) = self.get(&topic.name, index) {
            if p.topic_id == topic.id {
                return Ok(p);
            }
            self.stop_replica(&topic.name, index, true);
        }
        // The name comes from the controller, a network peer: it becomes a
        // path only if it is a topic name Kafka would accept (no '/', no
        // '..'), under the data directory.
        crate::metadata::validate_topic_name(&topic.name)?;
        if index < 0 {
            return Err(ApiError::new(
                ResponseError::UnknownTopicOrPartition,
                format!("partition index {index} of {}", topic.name),
            ));
        }
        let dir = self.data_dir.join(Partition::dir_name(&topic.name, index));
        let log = Log::open(&dir, config.clone(), now_ms)?;
        let part = Arc::new(Partition::new(
            &topic.name,
            index,
            topic.id,
            self.local_id,
            log,
        ));
        if let Some(hw) = self
            .hw_checkpoint
            .lock()
            .expect("hw checkpoint lock")
            .remove(&(topic.name.clone(), index))
        {
            part.restore_high_watermark(hw);
        }
        Ok(self
            .partitions
            .write()
            .expect("partitions lock")
            .entry((topic.name.clone(), index))
            .or_insert(part)
            .clone())
    }

    /// Leads `part` at `leader_epoch` (stops fetching it); whether this
    /// started a new leader epoch here. Per partition at debug level: a
    /// broker loss makes a broker leader of tens of thousands at once, and
    /// the caller logs them together.
    pub fn become_leader(
        &self,
        part: &Arc<Partition>,
        leader_epoch: i32,
        partition_epoch: i32,
        replicas: Vec<i32>,
        isr: Vec<i32>,
        now_ms: i64,
    ) -> Result<bool, ApiError> {
        self.fetchers.remove(&(part.topic.clone(), part.index));
        let started = part.make_leader(leader_epoch, partition_epoch, replicas, isr, now_ms)?;
        if started {
            debug!(topic = %part.topic, partition = part.index, leader_epoch, "became leader");
        }
        Ok(started)
    }

    /// Follows `leader` (no one when `-1`) at `leader_epoch`; whether the
    /// leader or its epoch changed (logged like [`Self::become_leader`]).
    pub fn become_follower(
        &self,
        part: &Arc<Partition>,
        leader: i32,
        leader_epoch: i32,
        partition_epoch: i32,
        replicas: Vec<i32>,
    ) -> bool {
        if !part.make_follower(leader, leader_epoch, partition_epoch, replicas) {
            return false;
        }
        debug!(topic = %part.topic, partition = part.index, leader, leader_epoch, "became follower");
        if leader >= 0 && leader != self.local_id {
            self.fetchers.add(leader, part.clone(), leader_epoch);
        } else {
            self.fetchers.remove(&(part.topic.clone(), part.index));
        }
        true
    }

    /// Stops serving a replica; with `delete` its data goes too.
    pub fn stop_replica(&self, topic: &str, index: i32, delete: bool) {
        let tp = (topic.to_string(), index);
        self.fetchers.remove(&tp);
        if !delete {
            if let Some(p) = self.get(topic, index) {
                p.make_stopped();
            }
            return;
        }
        let removed = self
            .partitions
            .write()
            .expect("partitions lock")
            .remove(&tp);
        if let Some(p) = removed {
            p.make_stopped();
            let dir = p.with_log(|l| l.dir().to_path_buf());
            // Readers still holding the partition keep their open files;
            // removing the directory is safe underneath them.
            if let Err(e) = std::fs::remove_dir_all(&dir) {
                warn!(dir = %dir.display(), error = %e, "cannot remove deleted partition's data");
            }
        }
    }

    /// Queues an ISR proposal for the controller.
    pub fn propose_isr(&self, proposal: IsrProposal) {
        let _ = self.isr_proposals.send(proposal);
    }

    /// Proposes removing followers that lag more than `lag_max_ms` from the
    /// ISR of every partition this broker leads.
    pub fn shrink_isrs(&self, now_ms: i64, lag_max_ms: i64) {
        for p in self.all() {
            if let Some(proposal) = p.maybe_shrink_isr(now_ms, lag_max_ms) {
                info!(topic = %p.topic, partition = p.index, isr = ?proposal.new_isr, "proposing ISR shrink");
                self.propose_isr(proposal);
            }
        }
    }

    /// Applies new topic configs to every open log of `topic`.
    pub fn update_topic_config(&self, topic: &str, config: &LogConfig) {
        for p in self.all().into_iter().filter(|p| p.topic == topic) {
            p.update_config(config.clone());
        }
    }

    /// Stops hosting `topic` and removes its data from disk.
    pub fn delete_topic(&self, topic: &str) {
        let keys: Vec<TopicPartition> = {
            let map = self.partitions.read().expect("partitions lock");
            map.keys().filter(|(t, _)| t == topic).cloned().collect()
        };
        for (t, i) in keys {
            self.stop_replica(&t, i, true);
        }
    }

    /// Removes partition directories that no topic in the metadata owns, e.g.
    /// left by a crash between deleting a topic and deleting its data.
    pub fn remove_orphans(&self, topics: &std::collections::BTreeMap<String, Arc<TopicView>>) {
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
    pub fn maintain(&self, now_ms: i64, retention: bool, producer_expiration_ms: i64) {
        for p in self.all() {
            // Nothing above the high watermark is deleted: it may still be
            // truncated away. (Read before the log lock: the partition
            // state lock comes first.) Compaction: `log_cleaner.rs`.
            let hw = p.high_watermark();
            let start = p.log_start_offset();
            p.with_log_mut(|log| {
                log.expire_producers(now_ms, producer_expiration_ms);
                if let Err(e) = log.maybe_roll(now_ms) {
                    warn!(topic = %p.topic, partition = p.index, error = %e, "roll failed");
                }
                if let Err(e) = log.maybe_flush(now_ms) {
                    warn!(topic = %p.topic, partition = p.index, error = %e, "flush failed");
                }
                // Segments deleted file.delete.delay.ms ago.
                if let Err(e) = log.delete_retired(now_ms) {
                    warn!(topic = %p.topic, partition = p.index, error = %e, "removing deleted segments failed");
                }
                if retention && log.config().cleanup_policy.delete {
                    match log.enforce_retention_up_to(now_ms, hw) {
                        Ok(n) if n > 0 => {
                            info!(topic = %p.topic, partition = p.index, segments = n, "retention deleted segments")
                        }
                        Ok(_) => {}
                        Err(e) => warn!(topic = %p.topic, partition = p.index, error = %e, "retention failed"),
                    }
                }
            });
            // Followers learn the new log start offset in their next fetch.
            if p.log_start_offset() != start {
                p.touch();
            }
        }
    }

    /// Stops every replica fetcher (the broker is going away).
    pub fn stop_fetchers(&self) {
        self.fetchers.shutdown();
    }

    /// Stops the fetchers, flushes and closes every log (clean shutdown).
    /// Closing a log costs a few fsyncs; with thousands of partitions they
    /// run on several threads (Kafka's `num.recovery.threads.per.data.dir`
    /// does the same at shutdown), so the process exits in seconds.
    pub fn shutdown(&self) {
        const CLOSE_THREADS: usize = 8;
        self.fetchers.shutdown();
        self.checkpoint_high_watermarks();
        let parts: Vec<Arc<Partition>> = {
            let mut map = self.partitions.write().expect("partitions lock");
            map.drain().map(|(_, p)| p).collect()
        };
        let queue = Mutex::new(parts);
        std::thread::scope(|s| {
            for _ in 0..CLOSE_THREADS {
                s.spawn(|| loop {
                    let Some(p) = queue.lock().expect("close queue").pop() else {
                        return;
                    };
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
                });
            }
        });
    }
}

/// The error a client gets for a partition this broker has no replica of.
pub fn not_hosted(topic: &str, partition: i32) -> ApiError {
    ApiError::new(
        ResponseError::UnknownTopicOrPartition,
        format!("this broker does not host {topic}-{partition}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hw_checkpoint_format_is_kafkas() {
        let text = "0\n2\norders 0 120\n__consumer_offsets 7 3\n";
        let hw = parse_hw_checkpoint(text);
        assert_eq!(hw.get(&("orders".to_string(), 0)), Some(&120));
        assert_eq!(hw.get(&("__consumer_offsets".to_string(), 7)), Some(&3));
        // A torn or foreign file is ignored rather than half believed.
        assert!(parse_hw_checkpoint("0\n3\norders 0 120\n").is_empty());
        assert!(parse_hw_checkpoint("1\n1\norders 0 120\n").is_empty());
        assert!(parse_hw_checkpoint("").is_empty());
    }
}
