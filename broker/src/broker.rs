//! The broker: shared state of one `skein-broker` process and its lifecycle
//! (start-up recovery, background maintenance, clean shutdown).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use skein_controller::ControllerConfig;
use tokio::sync::{mpsc, watch};
use tracing::{info, warn};

use crate::config::BrokerConfig;
use crate::error::ApiError;
use crate::meta_properties::MetaProperties;
use crate::metadata::{ClusterView, MetadataCache, TopicView};
use crate::metrics::Metrics;
use crate::replica_manager::ReplicaManager;
use crate::replication::fetcher::{AddressBook, FetcherConfig, FetcherManager};
use skein_controller::{BrokerLink, ControlPlane, ControllerService, PartitionChange};

/// Everything request handlers share.
pub struct Broker {
    /// The configuration it started with (properties file, flags).
    pub config: BrokerConfig,
    /// The configuration in force: `config` with the dynamic broker configs
    /// over it (see [`Broker::effective_config`]).
    pub dynamic: crate::dynamic_config::DynamicConfig,
    /// `leader/follower.replication.throttled.rate` and their usage.
    pub replication_quotas: crate::replication_throttle::ReplicationQuotas,
    pub metadata: Arc<MetadataCache>,
    pub replicas: Arc<ReplicaManager>,
    pub metrics: Arc<Metrics>,
    /// The consumer-group coordinator.
    pub groups: Arc<crate::group::GroupCoordinator>,
    /// The transaction coordinator.
    pub txns: Arc<crate::txn::TxnCoordinator>,
    /// The share coordinator (`__share_group_state`; KIP-932).
    pub share_coordinator: Arc<crate::share::coordinator::ShareCoordinator>,
    /// The share-partitions this broker leads and their sessions.
    pub share: Arc<crate::share::manager::ShareManager>,
    /// Client quota usage (produce and fetch byte rates).
    pub quotas: crate::quotas::QuotaManager,
    /// Open connections per address, `max.connections`, connection rates.
    pub connection_quotas: Arc<crate::connection_quotas::ConnectionQuotas>,
    /// `queued.max.request.bytes`: request bytes in flight, broker-wide.
    pub request_memory: crate::request_memory::RequestMemoryPool,
    /// Repeated warnings (refused ISR changes, storage errors) are logged
    /// once per partition every 10 s.
    pub warn_throttle: crate::warn_throttle::WarnThrottle,
    /// Incremental fetch sessions (KIP-227).
    pub fetch_sessions: crate::fetch_session::FetchSessionCache,
    /// Delegation tokens: settings, credentials derived.
    pub delegation_tokens: crate::delegation_tokens::TokenManager,
    /// Client telemetry (KIP-714): instances, and what they pushed.
    pub client_metrics: crate::client_metrics::ClientMetrics,
    /// KIP-405: the object store, with `remote.log.storage.system.enable`.
    pub remote: Option<Arc<crate::remote_log::RemoteLog>>,
    /// Runs its own controller (a single-node cluster, Kafka's combined
    /// mode) rather than sharing one with other brokers.
    pub(crate) combined: bool,
    /// Background tasks, stopped with the broker.
    /// (shared with the coordinators' context, whose tasks join them).
    pub(crate) tasks: Arc<Mutex<Vec<tokio::task::JoinHandle<()>>>>,
    /// Set when the broker stops; open connections close on it.
    pub(crate) stopped: watch::Sender<bool>,
    /// The `directory.id` of its log directory (meta.properties), sent with
    /// every registration.
    pub directory_id: skein_controller::DirectoryId,
    /// Its controlled shutdown has run (once per process).
    pub(crate) shut_down_controlled: std::sync::atomic::AtomicBool,
}

/// How a broker stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// Move leadership away first (controlled shutdown), then close the logs.
    Graceful,
    /// Stop at once, telling no one (tests simulate `kill -9` with it).
    Crash,
}

use crate::system::now_ms;

/// The controller's way into one in-process broker.
struct LocalLink(Weak<Broker>);

impl BrokerLink for LocalLink {
    fn deliver(&self, changes: Vec<PartitionChange>) {
        if let Some(b) = self.0.upgrade() {
            b.apply_changes(changes);
        }
    }

    fn topic_configs_changed(&self, topics: Vec<String>) {
        if let Some(b) = self.0.upgrade() {
            for t in topics {
                b.apply_topic_config(&t);
            }
        }
    }

    fn broker_configs_changed(&self) {
        if let Some(b) = self.0.upgrade() {
            b.apply_dynamic_configs();
        }
    }
}

/// A topic as [`Broker::apply_changes`] needs it for each of its partitions.
struct HostedTopic<'a> {
    meta: &'a TopicView,
    log_config: skein_storage::LogConfig,
    min_isr: usize,
}

impl Broker {
    /// A single-node cluster: runs its own controller with its metadata log in
    /// `<data-dir>/cluster-metadata/`, opens and recovers its logs.
    pub async fn open(config: BrokerConfig) -> anyhow::Result<Arc<Self>> {
        let meta = MetaProperties::ensure(&config.data_dir, config.node_id)?;
        let mut controller_config = ControllerConfig::default()
            .with_broker_settings(|k| config.raw.get(k).map(String::as_str));
        // A new single-node cluster starts at `--feature-level` (the newest
        // by default, as Kafka formats a new cluster at its latest metadata
        // version): group configs, client-metrics subscriptions and
        // delegation tokens need `skein.version` 4-5. The other features
        // follow as the operator sets them for a cluster of that level.
        controller_config.new_cluster_features =
            skein_controller::features::new_cluster_features(config.feature_level);
        controller_config.new_cluster_features.insert(
            skein_controller::features::SKEIN_VERSION.to_string(),
            config.feature_level,
        );
        let controller = ControllerService::open(
            Some(&config.data_dir.join("cluster-metadata")),
            controller_config,
        )?;
        Self::start(config, controller, true, meta).await
    }

    /// A broker of a cluster whose controller runs in another process: it
    /// serves the controller's session on `control.listen` and registers
    /// when the controller connects.
    pub async fn open_in_cluster(config: BrokerConfig) -> anyhow::Result<Arc<Self>> {
        let addr = config
            .control_listen
            .ok_or_else(|| anyhow::anyhow!("control.listen is not set"))?;
        let meta = MetaProperties::ensure(&config.data_dir, config.node_id)?;
        let remote = crate::remote_controller::RemoteController::new(config.node_id);
        remote.set_cluster_id(meta.cluster_id.clone());
        let server = remote.serve(addr, config.control_tls.as_ref()).await?;
        tracing::info!(%addr, "waiting for the controller's session");
        let broker = Self::start(config, remote, false, meta).await?;
        broker.spawn(server);
        Ok(broker)
    }

    /// A broker of a cluster whose controller is `controller`.
    pub async fn join(
        config: BrokerConfig,
        controller: Arc<dyn ControlPlane>,
    ) -> anyhow::Result<Arc<Self>> {
        let meta = MetaProperties::ensure(&config.data_dir, config.node_id)?;
        Self::start(config, controller, false, meta).await
    }

    async fn start(
        config: BrokerConfig,
        controller: Arc<dyn ControlPlane>,
        combined: bool,
        mut meta: MetaProperties,
    ) -> anyhow::Result<Arc<Self>> {
        let (isr_tx, isr_rx) = mpsc::unbounded_channel();
        let view_source = controller.clone();
        let addresses: AddressBook = Arc::new(move |id| {
            view_source
                .view()
                .brokers
                .get(&id)
                .map(|b| format!("{}:{}", b.host, b.port))
        });
        // The fetchers send this broker's current epoch (KIP-903); it is
        // the remote controller's session epoch, else the one registered.
        let metadata = Arc::new(MetadataCache::new(config.node_id, controller.clone()));
        metadata.set_clean_shutdown_epoch(crate::clean_shutdown::take(&config.data_dir)?);
        let epoch_of = metadata.clone();
        let metrics = Arc::new(Metrics::new());
        let remote = crate::remote_log::RemoteLog::open_for(&config, &metrics.registry)?;
        let replication_quotas =
            crate::replication_throttle::ReplicationQuotas::new(&metrics.registry);
        replication_quotas.set(config.replication_throttle);
        let view_of = metadata.clone();
        let local_id = config.node_id;
        let follower_throttle = crate::replication_throttle::FollowerThrottle {
            quota: replication_quotas.follower.clone(),
            throttled: Arc::new(move |topic: &str, partition: i32| {
                view_of.topic(topic).is_some_and(|t| {
                    crate::replication_throttle::lists(
                        t.configs
                            .get(crate::replication_throttle::FOLLOWER_REPLICAS)
                            .map(String::as_str),
                        partition,
                        local_id,
                    ) && t
                        .partitions
                        .get(partition as usize)
                        .is_some_and(|p| !p.isr.contains(&local_id))
                })
            }),
        };
        let fetchers = FetcherManager::new(
            FetcherConfig {
                local_id: config.node_id,
                max_wait_ms: config.replica_fetch_wait_max_ms,
                partition_max_bytes: config.replica_fetch_max_bytes,
                response_max_bytes: config.replica_fetch_response_max_bytes,
                backoff_ms: config.replica_fetch_backoff_ms,
                security: config.inter_broker_security.clone(),
                remote: remote.clone(),
            },
            follower_throttle,
            addresses,
            Arc::new(move || epoch_of.broker_epoch()),
        );
        let replicas = Arc::new(ReplicaManager::new(
            &config.data_dir,
            config.node_id,
            fetchers,
            isr_tx,
        ));
        let _ = metrics.data_dir.set(config.data_dir.clone());
        let quotas = crate::quotas::QuotaManager::new(&metrics.registry);
        let connection_quotas =
            crate::connection_quotas::ConnectionQuotas::new(config.connection_limits.clone());
        let request_memory =
            crate::request_memory::RequestMemoryPool::new(config.queued_max_request_bytes);
        let fetch_sessions = crate::fetch_session::FetchSessionCache::new(
            config.fetch_session_cache_slots,
            &metrics.registry,
        );
        let tasks = Arc::new(Mutex::new(Vec::new()));
        let broker = Arc::new_cyclic(|me: &Weak<Broker>| {
            let ctx = Arc::new(crate::coordinator_runtime::CoordinatorContext::new(
                replicas.clone(),
                metadata.clone(),
                config.node_id,
                config.replica_lag_time_max_ms,
                config.inter_broker_security.clone(),
                me.clone(),
                tasks.clone(),
            ));
            let groups = Arc::new(crate::group::GroupCoordinator::new(
                config.groups.clone(),
                &metrics.registry,
                ctx.clone(),
            ));
            let (share_coordinator, share) =
                crate::share::build(&ctx, &config, &metrics.registry, &groups);
            groups.attach_streams(config.streams.clone());
            let txns = crate::txn::TxnCoordinator::new(
                config.txns.clone(),
                &metrics.registry,
                ctx,
                groups.clone(),
            );
            Self {
                delegation_tokens: crate::delegation_tokens::TokenManager::new(
                    config.delegation_tokens.clone(),
                ),
                client_metrics: crate::client_metrics::ClientMetrics::new(
                    config.telemetry_max_bytes,
                ),
                metadata,
                dynamic: crate::dynamic_config::DynamicConfig::new(&config),
                replication_quotas,
                config,
                replicas,
                metrics,
                groups,
                txns,
                share_coordinator,
                share,
                quotas,
                connection_quotas,
                request_memory,
                warn_throttle: crate::warn_throttle::WarnThrottle::new(Duration::from_secs(10)),
                fetch_sessions,
                remote,
                combined,
                tasks,
                stopped: watch::channel(false).0,
                directory_id: meta.directory_id,
                shut_down_controlled: std::sync::atomic::AtomicBool::new(false),
            }
        });
        controller.attach(
            broker.config.node_id,
            Arc::new(LocalLink(Arc::downgrade(&broker))),
        );
        // Registration makes the controller send this broker its roles,
        // which opens (and recovers) the logs. The answer comes before they
        // are applied: heartbeats start at once (the controller would fence
        // a broker silent for its session timeout, and thousands of roles
        // can take longer to apply), and clients are served once they are.
        let b = broker.clone();
        let directory_id = meta.directory_id;
        tokio::task::spawn_blocking(move || {
            b.metadata.register(
                &b.config.advertised_host,
                b.config.advertised_port as u16,
                b.config.rack.clone(),
                directory_id,
                b.config.endpoints(),
            )
        })
        .await??;
        if !combined {
            broker.spawn_heartbeats();
        }
        let b = broker.clone();
        tokio::task::spawn_blocking(move || b.metadata.wait_applied()).await?;
        broker.apply_dynamic_configs();
        let image = broker.metadata.image();
        meta.join_cluster(&broker.config.data_dir, &image.cluster_id)?;
        if combined {
            broker.replicas.remove_orphans(&image.topics);
        }
        info!(
            topics = image.topics.len(),
            partitions = broker.replicas.all().len(),
            cluster_id = %image.cluster_id,
            directory_id = %meta.directory_id,
            "logs loaded"
        );
        broker.spawn_isr_sender(isr_rx);
        broker.spawn_isr_shrinker();
        broker.spawn_token_sweeper();
        Ok(broker)
    }

    /// Carries out the controller's partition instructions, in order.
    pub fn apply_changes(&self, changes: Vec<PartitionChange>) {
        // A stopped broker takes no role any more: a change delivered while
        // it was stopping would otherwise start a fetcher on a dead broker
        // (which then writes into a log directory a new process owns).
        if *self.stopped.borrow() {
            return;
        }
        let now = now_ms();
        // One batch can name thousands of partitions of one topic (a
        // CreateTopics of 10 000): each topic is resolved once per batch, not
        // once per partition, so applying it stays linear in its size.
        let image = self.metadata.image();
        let mut topics: BTreeMap<String, Result<HostedTopic<'_>, ApiError>> = BTreeMap::new();
        self.open_new_logs(&image, &mut topics, &changes, now);
        let started = std::time::Instant::now();
        let (mut leading, mut following) = (0usize, 0usize);
        let mut leaderless = Vec::new();
        for change in changes {
            let result = match change {
                PartitionChange::Leader {
                    topic,
                    partition,
                    leader_epoch,
                    partition_epoch,
                    replicas,
                    isr,
                } => self
                    .hosted(&image, &mut topics, &topic, partition, now)
                    .and_then(|p| {
                        self.replicas.become_leader(
                            &p,
                            leader_epoch,
                            partition_epoch,
                            replicas,
                            isr,
                            crate::system::mono_ms(),
                        )
                    })
                    .map(|started| leading += usize::from(started)),
                PartitionChange::Follower {
                    topic,
                    partition,
                    leader,
                    leader_epoch,
                    partition_epoch,
                    replicas,
                } => self
                    .hosted(&image, &mut topics, &topic, partition, now)
                    .map(|p| {
                        if leader < 0 {
                            leaderless.push(p.clone());
                        }
                        following += usize::from(self.replicas.become_follower(
                            &p,
                            leader,
                            leader_epoch,
                            partition_epoch,
                            replicas,
                        ))
                    }),
                PartitionChange::Stop {
                    topic,
                    partition,
                    delete,
                } => {
                    self.replicas.stop_replica(&topic, partition, delete);
                    Ok(())
                }
            };
            if let Err(e) = result {
                warn!(error = %e, "cannot apply the controller's instruction");
            }
        }
        crate::replica_log_report::send(&self.metadata, leaderless);
        if leading + following > 0 {
            info!(
                leader_of = leading,
                follower_of = following,
                ms = started.elapsed().as_millis() as u64,
                "took new roles from the controller"
            );
        }
    }

    /// Opens (recovers) on several threads the logs that `changes` give
    /// this broker for the first time — every hosted partition when it
    /// starts, thousands at a large CreateTopics — so that the changes,
    /// applied in order afterwards, find them open. A partition the batch
    /// also stops is left to the ordered pass. A log that fails to open here
    /// is tried again, and its error reported, by that pass.
    fn open_new_logs<'a>(
        &self,
        image: &'a ClusterView,
        topics: &mut BTreeMap<String, Result<HostedTopic<'a>, ApiError>>,
        changes: &[PartitionChange],
        now: i64,
    ) {
        const OPEN_THREADS: usize = 8;
        let stopped: std::collections::BTreeSet<(&str, i32)> = changes
            .iter()
            .filter_map(|c| match c {
                PartitionChange::Stop {
                    topic, partition, ..
                } => Some((topic.as_str(), *partition)),
                _ => None,
            })
            .collect();
        let mut new: Vec<(&str, i32)> = changes
            .iter()
            .filter_map(|c| match c {
                PartitionChange::Leader {
                    topic, partition, ..
                }
                | PartitionChange::Follower {
                    topic, partition, ..
                } => Some((topic.as_str(), *partition)),
                PartitionChange::Stop { .. } => None,
            })
            .filter(|k| !stopped.contains(k) && self.replicas.get(k.0, k.1).is_none())
            .collect();
        new.sort_unstable();
        new.dedup();
        if new.len() < 2 {
            return;
        }
        for (topic, _) in &new {
            if !topics.contains_key(*topic) {
                let resolved = self.resolve_topic(image, topic);
                topics.insert(topic.to_string(), resolved);
            }
        }
        let topics = &*topics;
        let queue = Mutex::new(new);
        std::thread::scope(|s| {
            for _ in 0..OPEN_THREADS {
                s.spawn(|| loop {
                    let Some((topic, partition)) = queue.lock().expect("open queue").pop() else {
                        return;
                    };
                    if let Some(Ok(t)) = topics.get(topic) {
                        let _ = self
                            .replicas
                            .open_partition(t.meta, partition, &t.log_config, now);
                    }
                });
            }
        });
    }

    /// The replica of `topic`-`partition`, opened with the topic's configs;
    /// `topics` keeps what was resolved of each topic for the rest of the
    /// batch.
    fn hosted<'a>(
        &self,
        image: &'a ClusterView,
        topics: &mut BTreeMap<String, Result<HostedTopic<'a>, ApiError>>,
        topic: &str,
        partition: i32,
        now: i64,
    ) -> Result<Arc<crate::partition::Partition>, ApiError> {
        if !topics.contains_key(topic) {
            let resolved = self.resolve_topic(image, topic);
            topics.insert(topic.to_string(), resolved);
        }
        let t = topics[topic].as_ref().map_err(Clone::clone)?;
        let part = self
            .replicas
            .open_partition(t.meta, partition, &t.log_config, now)?;
        part.set_min_isr(t.min_isr);
        Ok(part)
    }

    fn resolve_topic<'a>(
        &self,
        image: &'a ClusterView,
        topic: &str,
    ) -> Result<HostedTopic<'a>, ApiError> {
        let meta = image.topics.get(topic).ok_or_else(|| {
            ApiError::new(
                ResponseError::UnknownTopicOrPartition,
                format!("topic '{topic}' is not in the metadata"),
            )
        })?;
        let log_config = self
            .effective_config()
            .topic_log_config(&meta.configs)
            .map_err(|e| ApiError::new(ResponseError::InvalidConfig, e.to_string()))?;
        Ok(HostedTopic {
            meta,
            log_config,
            min_isr: self.min_insync_replicas(meta),
        })
    }

    /// Applies `topic`'s configs from the metadata view to the logs and
    /// partitions this broker hosts (after AlterConfigs here or elsewhere).
    pub fn apply_topic_config(&self, topic: &str) {
        let Some(meta) = self.metadata.topic(topic) else {
            return;
        };
        let lc = match self.effective_config().topic_log_config(&meta.configs) {
            Ok(lc) => lc,
            Err(e) => {
                warn!(topic, error = %e, "cannot apply topic configs");
                return;
            }
        };
        if let Some(remote) = &self.remote {
            remote.on_topic_config(self.replicas.all(), topic, &meta.configs, &lc);
        }
        self.replicas.update_topic_config(topic, &lc);
        let min_isr = self.min_insync_replicas(&meta);
        for p in self.replicas.all().into_iter().filter(|p| p.topic == topic) {
            p.set_min_isr(min_isr);
        }
    }

    /// `min.insync.replicas` of a topic (its own, else the broker default).
    pub fn min_insync_replicas(&self, topic: &TopicView) -> usize {
        topic
            .configs
            .get(skein_controller::election::MIN_INSYNC_REPLICAS)
            .and_then(|v| v.parse::<usize>().ok())
            .unwrap_or(self.effective_config().min_insync_replicas.max(1) as usize)
    }

    /// The configuration in force: the one it started with, with the
    /// dynamic broker configs over it.
    pub fn effective_config(&self) -> Arc<BrokerConfig> {
        self.dynamic.get()
    }

    /// Keeps `task` to be stopped with the broker.
    pub(crate) fn spawn(&self, task: tokio::task::JoinHandle<()>) {
        let mut tasks = self.tasks.lock().expect("tasks lock");
        tasks.retain(|t| !t.is_finished());
        tasks.push(task);
    }

    /// Sends the leaders' ISR proposals to the controller, one at a time,
    /// and hands each answer back to its partition.
    /// Heartbeats to the controller; re-registers when it no longer knows
    /// this broker's epoch (it was fenced while unreachable).
    fn spawn_heartbeats(self: &Arc<Self>) {
        let me = Arc::downgrade(self);
        let every = Duration::from_millis(self.config.broker_heartbeat_interval_ms.max(10));
        self.spawn(tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                let Some(b) = me.upgrade() else { return };
                let result = tokio::task::spawn_blocking(move || match b.metadata.heartbeat() {
                    Ok(()) => Ok(()),
                    // The controller did not answer (busy, or between
                    // sessions): the next heartbeat tries again. Registering
                    // anew would have it send every role this broker holds
                    // (100,000 instructions at that size) while it is busy.
                    Err(e) if !needs_registration(e.code) => {
                        warn!(error = %e, "heartbeat not answered; trying again");
                        Ok(())
                    }
                    Err(e) => {
                        warn!(error = %e, "heartbeat refused; registering again");
                        b.metadata
                            .register(
                                &b.config.advertised_host,
                                b.config.advertised_port as u16,
                                b.config.rack.clone(),
                                b.directory_id,
                                b.config.endpoints(),
                            )
                            .map(|_| ())
                    }
                })
                .await;
                if let Ok(Err(e)) = result {
                    warn!(error = %e, "cannot register with the controller");
                }
            }
        }));
    }

    /// A receiver that turns true when the broker stops.
    pub fn stopped(&self) -> watch::Receiver<bool> {
        self.stopped.subscribe()
    }

    /// Spawns retention, compaction, roll and flush work on a timer.
    pub fn spawn_maintenance(self: &Arc<Self>) {
        let broker = self.clone();
        self.spawn(tokio::spawn(async move {
            let tick = Duration::from_millis(
                broker
                    .config
                    .log_flush_scheduler_interval_ms
                    .clamp(100, 60_000),
            );
            let retention_every = broker.config.log_retention_check_interval_ms.max(100);
            let mut last_retention = now_ms();
            let mut last_hw_checkpoint = now_ms();
            loop {
                tokio::time::sleep(tick).await;
                // Normally applied when the controller says they changed;
                // this catches a view that arrived some other way.
                broker.apply_dynamic_configs();
                let now = now_ms();
                let retention = now - last_retention >= retention_every as i64;
                if retention {
                    last_retention = now;
                }
                // Kafka's replica.high.watermark.checkpoint.interval.ms default.
                let hw_checkpoint = now - last_hw_checkpoint >= 5_000;
                if hw_checkpoint {
                    last_hw_checkpoint = now;
                }
                let replicas = broker.replicas.clone();
                let expiry = broker.effective_config().producer_id_expiration_ms;
                if let Err(e) = tokio::task::spawn_blocking(move || {
                    replicas.maintain(now, retention, expiry);
                    if hw_checkpoint {
                        replicas.checkpoint_high_watermarks();
                    }
                })
                .await
                {
                    warn!(error = %e, "log maintenance panicked");
                }
            }
        }));
    }
}

/// A heartbeat refused with this code means the controller no longer knows
/// this incarnation (it fenced it, or lost its registration): register
/// again. Any other error (a timeout, no controller) is retried.
fn needs_registration(code: ResponseError) -> bool {
    matches!(
        code,
        ResponseError::StaleBrokerEpoch | ResponseError::BrokerIdNotRegistered
    )
}
