//! KIP-405 on the broker (Kafka's `RemoteLogManager`): the leader copies
//! closed segments of tiered topics to the object store and applies remote
//! retention; followers learn what was copied (so they too delete local
//! segments by `local.retention.*`) and start from remote state when their
//! leader has moved its local log start past them; consumers' reads below
//! the local log start are served from the store through a bounded cache.
//!
//! Remote metadata is one manifest per partition in the store, written by
//! the leader of its epoch (docs/tiered-storage.md says why not
//! `__remote_log_metadata` nor the controller's metadata log). `tasks.rs`
//! holds the periodic copy, retention and follower work, `read.rs` the
//! reads and the follower's restore.

mod metrics;
mod quota;
mod read;
mod tasks;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use skein_tiered::{Manifest, PartitionKey, RemoteStore, SegmentCache, StoreConfig, TieredError};

use crate::config::TieredConfig;
use crate::partition::Partition;

/// The broker's remote storage: the store, the read cache, and the
/// manifests as last read or written.
pub struct RemoteLog {
    store: RemoteStore,
    cache: SegmentCache,
    broker_id: i32,
    task_interval: Duration,
    fetch_max_wait: Duration,
    /// `remote.list.offsets.request.timeout.ms`.
    list_offsets_timeout: Duration,
    /// `remote.log.reader.threads`: the remote reads of all fetches that
    /// may run at once (Kafka's reader thread pool).
    reader_slots: tokio::sync::Semaphore,
    /// By partition: the manifest as this broker last read or wrote it.
    manifests: Mutex<HashMap<(String, i32), Arc<Manifest>>>,
    /// Remote segments open for reading.
    open_readers: Mutex<read::OpenReaders>,
    /// Remote transaction indexes read (read_committed).
    txn_indexes: Mutex<HashMap<uuid::Uuid, bytes::Bytes>>,
    /// `remote.log.manager.copy.max.bytes.per.second`.
    copy_quota: RemoteQuota,
    /// `remote.log.manager.fetch.max.bytes.per.second`.
    fetch_quota: RemoteQuota,
    pub metrics: RemoteMetrics,
}

pub use metrics::RemoteMetrics;
pub use quota::RemoteQuota;

impl std::fmt::Debug for RemoteLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteLog")
            .field("store", &self.store.describe())
            .finish_non_exhaustive()
    }
}

impl RemoteLog {
    /// The remote log of a broker with `remote.log.storage.system.enable`;
    /// its read cache lives in `<data dir>/.remote-cache`.
    pub fn open(
        cfg: &TieredConfig,
        broker_id: i32,
        data_dir: &std::path::Path,
        registry: &prometheus::Registry,
    ) -> Result<Arc<Self>, TieredError> {
        skein_tiered::install_crypto_provider();
        let store_config = StoreConfig {
            url: cfg.store_url.clone().unwrap_or_default(),
            endpoint: cfg.s3_endpoint.clone(),
            region: Some(cfg.s3_region.clone()),
            access_key_id: cfg.s3_access_key_id.clone(),
            secret_access_key: cfg.s3_secret_access_key.clone(),
            ..StoreConfig::default()
        };
        let store = RemoteStore::open(&store_config)?;
        let cache = SegmentCache::new(
            store.clone(),
            data_dir.join(".remote-cache"),
            cfg.cache_size_bytes,
        )?;
        tracing::info!(store = %store.describe(), cache_bytes = cfg.cache_size_bytes, "tiered storage on");
        let remote = Arc::new(RemoteLog {
            store,
            cache,
            broker_id,
            task_interval: Duration::from_millis(cfg.task_interval_ms.max(10)),
            fetch_max_wait: Duration::from_millis(cfg.fetch_max_wait_ms.max(1)),
            list_offsets_timeout: Duration::from_millis(cfg.list_offsets_timeout_ms.max(1)),
            reader_slots: tokio::sync::Semaphore::new(cfg.reader_threads.max(1)),
            manifests: Mutex::new(HashMap::new()),
            open_readers: Mutex::new(read::OpenReaders::default()),
            txn_indexes: Mutex::new(HashMap::new()),
            copy_quota: RemoteQuota::default(),
            fetch_quota: RemoteQuota::default(),
            metrics: RemoteMetrics::new(registry),
        });
        remote.set_quotas(cfg);
        Ok(remote)
    }

    /// `remote.fetch.max.wait.ms`: how long a fetch waits for its remote reads.
    pub fn fetch_max_wait(&self) -> Duration {
        self.fetch_max_wait
    }

    /// Takes the copy and fetch byte-rate limits of `cfg` (at start and at
    /// every change of the dynamic broker configs).
    pub fn set_quotas(&self, cfg: &TieredConfig) {
        self.copy_quota.set_limit(cfg.copy_max_bytes_per_second);
        self.fetch_quota.set_limit(cfg.fetch_max_bytes_per_second);
    }

    /// The remote log of a broker configured with
    /// `remote.log.storage.system.enable`, else `None`.
    pub fn open_for(
        config: &crate::config::BrokerConfig,
        registry: &prometheus::Registry,
    ) -> Result<Option<Arc<Self>>, TieredError> {
        if !config.tiered.system_enable {
            return Ok(None);
        }
        Self::open(&config.tiered, config.node_id, &config.data_dir, registry).map(Some)
    }

    /// New configs of `topic` are about to apply: turning
    /// `remote.storage.enable` off with `remote.log.delete.on.disable=true`
    /// deletes the remote data of the partitions led here (see
    /// [`RemoteLog::disable`]).
    pub fn on_topic_config(
        self: &Arc<Self>,
        hosted: Vec<Arc<Partition>>,
        topic: &str,
        configs: &std::collections::BTreeMap<String, String>,
        new: &skein_storage::LogConfig,
    ) {
        let delete_remote = configs
            .get(skein_controller::topic_config::keys::REMOTE_LOG_DELETE_ON_DISABLE)
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
        if new.remote_storage_enable || !delete_remote {
            return;
        }
        for p in hosted.into_iter().filter(|p| p.topic == topic) {
            if p.with_log(|l| l.config().remote_storage_enable) && p.is_leader() {
                self.disable(p);
            }
        }
    }

    /// The store's name for `p`'s objects.
    fn key(p: &Partition) -> PartitionKey {
        PartitionKey::new(p.topic.clone(), p.topic_id, p.index)
    }

    /// `p`'s manifest as last seen; `refresh` (or none seen yet) reads it
    /// from the store. An empty one when the partition has none.
    async fn manifest(&self, p: &Partition, refresh: bool) -> Result<Arc<Manifest>, TieredError> {
        let tp = (p.topic.clone(), p.index);
        if !refresh {
            if let Some(m) = self.manifests.lock().expect("manifests").get(&tp) {
                return Ok(m.clone());
            }
        }
        let m = Arc::new(
            self.store
                .load_manifest(&Self::key(p))
                .await?
                .unwrap_or_default(),
        );
        self.manifests
            .lock()
            .expect("manifests")
            .insert(tp, m.clone());
        Ok(m)
    }

    fn remember(&self, p: &Partition, m: Manifest) -> Arc<Manifest> {
        let m = Arc::new(m);
        self.manifests
            .lock()
            .expect("manifests")
            .insert((p.topic.clone(), p.index), m.clone());
        m
    }

    /// Brings the read cache's gauges up to date (on every scrape).
    pub fn refresh_metrics(&self) {
        let m = &self.metrics;
        m.cache_bytes.set(self.cache.cached_bytes() as i64);
        m.cache_hits
            .inc_by(self.cache.hits().saturating_sub(m.cache_hits.get()));
        m.cache_misses
            .inc_by(self.cache.misses().saturating_sub(m.cache_misses.get()));
    }

    /// A deleted topic's remote data goes (Kafka's leader does it when it
    /// stops the partition; here the broker that deletes the topic does,
    /// in the background). The key holds the topic id: a topic created
    /// again under the same name never sees the old data.
    pub fn delete_topic(self: &Arc<Self>, topic: &str, topic_id: uuid::Uuid, partitions: i32) {
        let remote = self.clone();
        let topic = topic.to_string();
        tokio::spawn(async move {
            for index in 0..partitions {
                let key = PartitionKey::new(topic.clone(), topic_id, index);
                if let Err(e) = remote.store.delete_partition(&key).await {
                    tracing::warn!(%topic, partition = index, error = %e, "cannot delete a deleted topic's remote data");
                }
                remote.forget(&topic, index);
            }
            tracing::info!(%topic, partitions, "remote data of the deleted topic deleted");
        });
    }

    /// `remote.storage.enable` turned off with
    /// `remote.log.delete.on.disable=true` on a partition this broker
    /// leads: its remote data goes and its log start moves to its local
    /// log start (Kafka's `TopicConfigHandler`).
    pub fn disable(self: &Arc<Self>, p: Arc<Partition>) {
        let remote = self.clone();
        tokio::spawn(async move {
            let local_start = p.with_log(|l| l.local_log_start_offset());
            if let Err(e) = p.with_log_mut(|l| l.delete_records_before(local_start)) {
                tracing::warn!(topic = %p.topic, partition = p.index, error = %e, "cannot move the log start past remote data");
            }
            p.with_log_mut(|l| l.set_highest_offset_in_remote(-1));
            match remote.store.delete_partition(&Self::key(&p)).await {
                Ok(()) => {
                    tracing::info!(topic = %p.topic, partition = p.index, log_start = local_start, "tiered storage off: remote data deleted")
                }
                Err(e) => {
                    tracing::warn!(topic = %p.topic, partition = p.index, error = %e, "cannot delete remote data")
                }
            }
            remote.forget(&p.topic, p.index);
        });
    }

    /// Forgets a partition this broker no longer hosts.
    pub fn forget(&self, topic: &str, index: i32) {
        self.manifests
            .lock()
            .expect("manifests")
            .remove(&(topic.to_string(), index));
    }
}
