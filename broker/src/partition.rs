//! A partition hosted on this broker: its log plus the signal that wakes
//! long-polling fetchers when records arrive.

use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::RwLock;

use skein_storage::{AppendInfo, Log, LogConfig, ReadResult};
use tokio::sync::Notify;
use uuid::Uuid;

use crate::error::ApiError;

/// One topic-partition replica and its log.
pub struct Partition {
    pub topic: String,
    pub index: i32,
    pub topic_id: Uuid,
    leader_epoch: AtomicI32,
    log: RwLock<Log>,
    /// Notified after every append so fetchers waiting on `max.wait.ms` wake
    /// at once instead of polling.
    appended: Notify,
}

impl Partition {
    pub fn new(topic: &str, index: i32, topic_id: Uuid, leader_epoch: i32, log: Log) -> Self {
        Self {
            topic: topic.to_string(),
            index,
            topic_id,
            leader_epoch: AtomicI32::new(leader_epoch),
            log: RwLock::new(log),
            appended: Notify::new(),
        }
    }

    pub fn leader_epoch(&self) -> i32 {
        self.leader_epoch.load(Ordering::Acquire)
    }

    /// Appends producer batches as leader and wakes waiting fetchers.
    pub fn append_as_leader(
        &self,
        records: &mut [u8],
        now_ms: i64,
    ) -> Result<AppendInfo, ApiError> {
        // The log applies the flush policy (flush.messages / flush.ms) itself.
        let info = self.log.write().expect("log lock").append_as_leader(
            records,
            self.leader_epoch(),
            now_ms,
        )?;
        self.appended.notify_waiters();
        Ok(info)
    }

    /// Reads whole batches from `offset` up to the high watermark.
    pub fn read(
        &self,
        offset: i64,
        max_bytes: usize,
        min_one_batch: bool,
    ) -> Result<ReadResult, ApiError> {
        let log = self.log.read().expect("log lock");
        let hw = log.log_end_offset();
        Ok(log.read(offset, max_bytes, hw, min_one_batch)?)
    }

    /// The high watermark; with a single replica it is the log end offset.
    pub fn high_watermark(&self) -> i64 {
        self.log.read().expect("log lock").log_end_offset()
    }

    pub fn log_start_offset(&self) -> i64 {
        self.log.read().expect("log lock").log_start_offset()
    }

    /// A future that completes on the next append; call `enable()` on it
    /// before re-checking the log so no append is missed in between.
    pub fn appended(&self) -> tokio::sync::futures::Notified<'_> {
        self.appended.notified()
    }

    /// Runs `f` with shared access to the log.
    pub fn with_log<T>(&self, f: impl FnOnce(&Log) -> T) -> T {
        f(&self.log.read().expect("log lock"))
    }

    /// Runs `f` with exclusive access to the log (retention, compaction, config).
    pub fn with_log_mut<T>(&self, f: impl FnOnce(&mut Log) -> T) -> T {
        f(&mut self.log.write().expect("log lock"))
    }

    pub fn update_config(&self, config: LogConfig) {
        self.with_log_mut(|l| l.update_config(config));
    }

    /// Directory name of a partition's log: `<topic>-<partition>`.
    pub fn dir_name(topic: &str, index: i32) -> String {
        format!("{topic}-{index}")
    }

    /// Flushes the log and writes its clean-shutdown state.
    pub fn close(self) -> Result<(), ApiError> {
        let log = self.log.into_inner().expect("log lock");
        Ok(log.close()?)
    }
}
