//! The broker: shared state of one `skein-broker` process and its lifecycle
//! (start-up recovery, background maintenance, clean shutdown).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use kafka_protocol::error::ResponseError;
use tracing::{info, warn};

use crate::config::BrokerConfig;
use crate::error::ApiError;
use crate::metadata::{MetadataStore, TopicMeta};
use crate::metrics::Metrics;
use crate::replica_manager::ReplicaManager;

/// Everything request handlers share.
pub struct Broker {
    pub config: BrokerConfig,
    pub metadata: MetadataStore,
    pub replicas: Arc<ReplicaManager>,
    pub metrics: Arc<Metrics>,
    /// The consumer-group coordinator.
    pub groups: crate::group::GroupCoordinator,
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

impl Broker {
    /// Opens the metadata image and every partition log (recovering them).
    pub fn open(config: BrokerConfig) -> anyhow::Result<Arc<Self>> {
        let metadata = MetadataStore::open(
            &config.data_dir,
            config.node_id,
            &config.advertised_host,
            config.advertised_port as u16,
            config.rack.clone(),
        )?;
        let replicas = Arc::new(ReplicaManager::new(&config.data_dir));
        let image = metadata.image();
        replicas.remove_orphans(&image.topics);
        let now = now_ms();
        for topic in image.topics.values() {
            let lc = config
                .topic_log_config(&topic.configs)
                .map_err(|e| anyhow::anyhow!("topic {}: {e}", topic.name))?;
            replicas
                .ensure_topic(topic, &lc, now)
                .map_err(|e| anyhow::anyhow!("topic {}: {e}", topic.name))?;
        }
        info!(
            topics = image.topics.len(),
            partitions = replicas.all().len(),
            cluster_id = %image.cluster_id,
            "logs loaded"
        );
        let metrics = Arc::new(Metrics::new());
        let groups = crate::group::GroupCoordinator::new(config.groups.clone(), &metrics.registry);
        Ok(Arc::new(Self {
            config,
            metadata,
            replicas,
            metrics,
            groups,
        }))
    }

    /// Creates a topic and opens its partition logs.
    pub fn create_topic(
        &self,
        name: &str,
        partitions: i32,
        replication_factor: i16,
        configs: BTreeMap<String, String>,
    ) -> Result<TopicMeta, ApiError> {
        let lc = self
            .config
            .topic_log_config(&configs)
            .map_err(|e| ApiError::new(ResponseError::InvalidConfig, e.to_string()))?;
        let topic = self
            .metadata
            .create_topic(name, partitions, replication_factor, configs)?;
        info!(topic = name, partitions, "topic created");
        self.replicas.ensure_topic(&topic, &lc, now_ms())?;
        Ok(topic)
    }

    /// Auto-creates `name` with the broker defaults when allowed; returns the
    /// topic if it exists afterwards.
    pub fn auto_create(&self, name: &str) -> Result<TopicMeta, ApiError> {
        if let Some(t) = self.metadata.topic(name) {
            return Ok(t);
        }
        if !self.config.auto_create_topics_enable {
            return Err(ApiError::new(
                ResponseError::UnknownTopicOrPartition,
                format!("topic '{name}' does not exist and auto.create.topics.enable is false"),
            ));
        }
        match self.create_topic(
            name,
            self.config.num_partitions,
            self.config.default_replication_factor.min(1),
            BTreeMap::new(),
        ) {
            Err(e) if e.code == ResponseError::TopicAlreadyExists => {
                self.metadata.topic(name).ok_or_else(|| {
                    ApiError::new(ResponseError::UnknownTopicOrPartition, "topic vanished")
                })
            }
            other => other,
        }
    }

    /// Deletes a topic: metadata first, then its data.
    pub fn delete_topic(&self, name: &str) -> Result<TopicMeta, ApiError> {
        let t = self.metadata.delete_topic(name)?;
        self.replicas.delete_topic(name);
        info!(topic = name, "topic deleted");
        Ok(t)
    }

    /// Spawns retention, compaction, roll and flush work on a timer.
    pub fn spawn_maintenance(self: &Arc<Self>) {
        let broker = self.clone();
        tokio::spawn(async move {
            let tick = Duration::from_millis(
                broker
                    .config
                    .log_flush_scheduler_interval_ms
                    .clamp(100, 60_000),
            );
            let retention_every = broker.config.log_retention_check_interval_ms.max(100);
            let cleaner_every: i64 = 15_000;
            let mut last_retention = now_ms();
            let mut last_clean = now_ms();
            loop {
                tokio::time::sleep(tick).await;
                let now = now_ms();
                let retention = now - last_retention >= retention_every as i64;
                let compaction =
                    broker.config.log_cleaner_enable && now - last_clean >= cleaner_every;
                if retention {
                    last_retention = now;
                }
                if compaction {
                    last_clean = now;
                }
                let replicas = broker.replicas.clone();
                let expiry = broker.config.producer_id_expiration_ms;
                if let Err(e) = tokio::task::spawn_blocking(move || {
                    replicas.maintain(now, retention, compaction, expiry)
                })
                .await
                {
                    warn!(error = %e, "log maintenance panicked");
                }
            }
        });
    }

    /// Flushes and closes every log.
    pub fn shutdown(&self) {
        self.replicas.shutdown();
        info!("logs closed");
    }
}
