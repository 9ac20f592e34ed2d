//! [`ControllerService`]: the controller core with its I/O around it —
//! the metadata log ([`crate::store`]), the published [`ClusterView`], and
//! delivery of partition instructions to the brokers attached to it.
//!
//! A single `skein-broker` runs one for itself (combined mode, metadata log
//! in `<data-dir>/cluster-metadata/`); the operator runs one per cluster
//! (files for the `local` platform, ConfigMaps on Kubernetes); tests run
//! one for several in-process brokers. Events are handled one at a time
//! under a lock, and the instructions they produce are delivered before the
//! lock is released, so every broker sees them in the controller's order.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use uuid::Uuid;

mod timing;
mod views;

use timing::{release_free_memory, EventKind, EventTiming};
use views::{full_view, updated_view};

use crate::plane::{BrokerLink, ControlPlane, ControlPlaneError, PartitionChange};
use crate::store::{new_writer_id, BlobStore, FileBlobStore, MetadataLog, MetadataRecord};
use crate::view::{kafka_base64, ClusterView};
use crate::{BrokerInfo, Command, ControllerConfig, ControllerCore, Event, MetadataImage, Reply};

struct State {
    core: ControllerCore,
    cluster_id: String,
    /// The metadata log (`None`: in memory only).
    log: Option<MetadataLog>,
    links: BTreeMap<i32, Arc<dyn BrokerLink>>,
    /// An event changed the core but its commit failed, so its view was
    /// never published: the next view is built whole.
    view_stale: bool,
    /// Records persisted since the allocator last gave memory back, and
    /// when it did (see [`timing::release_free_memory`]).
    untrimmed_records: usize,
    last_trim: std::time::Instant,
}

/// How long after the last release of free memory quick events that wrote
/// records may run before the next.
const TRIM_AFTER_QUICK_EVENTS: std::time::Duration = std::time::Duration::from_secs(2);

/// The `kind` labels of `skein_controller_leader_elections_total`.
pub const ELECTION_KINDS: [&str; 4] = ["clean", "unclean", "unclean_recovery", "preferred"];

/// The controller core, persisted and connected to its brokers.
pub struct ControllerService {
    state: Mutex<State>,
    /// Published before instructions are delivered, so a broker applying
    /// one finds the topic it refers to. Separate from `state` so a broker
    /// can read it while the controller is delivering.
    view: RwLock<Arc<ClusterView>>,
    /// The topics each recent view changed (`None`: anything may have),
    /// by version, so sessions can send brokers deltas.
    history: Mutex<std::collections::VecDeque<(u64, Option<BTreeSet<String>>)>>,
    published: tokio::sync::watch::Sender<u64>,
    /// `skein_controller_leader_elections_total{kind}`: the [`ELECTION_KINDS`]
    /// (registered by whoever exports the controller's metrics).
    pub elections: prometheus::IntCounterVec,
    /// `skein_controller_broker_storage_lost_total`: brokers that came back
    /// with another log directory (registered like `elections`).
    pub storage_lost: prometheus::IntCounter,
    /// `skein_controller_self_healing_reassignments_total`: partitions
    /// self-healing reassigned off lost brokers (registered like `elections`).
    pub self_healing: prometheus::IntCounter,
    /// Milliseconds for the core (it only compares them).
    clock: Clock,
    /// When each broker's latest heartbeat arrived, with the epoch it
    /// named: noted before the event waits for the controller's lock, and
    /// handed to the core before the next event, so a heartbeat queued
    /// behind a long event (a registration handing out 100,000 roles) still
    /// counts when the `Tick` that checks sessions gets the lock first.
    contacts: Mutex<std::collections::HashMap<i32, (u64, u64)>>,
    /// Unclean recoveries not yet taken by the platform to report
    /// ([`ControllerService::take_recoveries`]); the latest 64 are kept.
    recoveries: Mutex<Vec<crate::unclean_recovery::RecoveryNote>>,
}

/// Where the service reads the time it passes to the core.
pub type Clock = Arc<dyn Fn() -> u64 + Send + Sync>;

/// Milliseconds since the Unix epoch.
pub fn system_clock() -> Clock {
    Arc::new(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0)
    })
}

impl ControllerService {
    /// Bumped whenever a new view is published (sessions push it to their
    /// brokers).
    fn publish_view(&self, mut view: ClusterView, changed: Option<BTreeSet<String>>) {
        {
            let mut current = self.view.write().expect("view lock");
            view.version = current.version + 1;
            let mut history = self.history.lock().expect("history lock");
            history.push_back((view.version, changed));
            while history.len() > HISTORY {
                history.pop_front();
            }
            *current = Arc::new(view);
        }
        self.published.send_modify(|n| *n += 1);
    }

    /// The topics that changed from view `base` to view `to` (`None` when
    /// that is no longer known: send the whole view).
    pub fn topics_changed_between(&self, base: u64, to: u64) -> Option<BTreeSet<String>> {
        let history = self.history.lock().expect("history lock");
        let first = history.front()?.0;
        if base + 1 < first || to < base {
            return None;
        }
        let mut out = BTreeSet::new();
        for (version, changed) in history.iter() {
            if *version > base && *version <= to {
                out.extend(changed.as_ref()?.iter().cloned());
            }
        }
        Some(out)
    }

    /// Completes a `changed()` each time a new view is published.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.published.subscribe()
    }

    /// A controller whose metadata log lives in the directory `dir`
    /// (created when missing; an older Skein's image in `<dir>.json` is
    /// moved into it), or only in memory when `dir` is `None`.
    pub fn open(dir: Option<&Path>, config: ControllerConfig) -> std::io::Result<Arc<Self>> {
        let store = match dir {
            Some(dir) => Some(
                Box::new(FileBlobStore::open(dir, Some(dir.with_extension("json")))?)
                    as Box<dyn BlobStore>,
            ),
            None => None,
        };
        Self::open_store(store, config)
    }

    /// A controller whose metadata log lives in `store` (an empty cluster
    /// with a new cluster id when the store holds nothing yet).
    pub fn open_store(
        store: Option<Box<dyn BlobStore>>,
        config: ControllerConfig,
    ) -> std::io::Result<Arc<Self>> {
        Self::open_with_clock(store, config, system_clock())
    }

    /// [`Self::open_store`] with the time the core sees coming from `clock`.
    pub fn open_with_clock(
        store: Option<Box<dyn BlobStore>>,
        config: ControllerConfig,
        clock: Clock,
    ) -> std::io::Result<Arc<Self>> {
        let (core, cluster_id, log) = match store {
            Some(store) => {
                let mut opened = MetadataLog::open(store, new_writer_id(), new_cluster_id)?;
                if opened.created && !config.new_cluster_features.is_empty() {
                    // A new cluster starts at the newest levels it is
                    // configured for, before any broker registers.
                    let cluster = &mut opened.image.cluster;
                    cluster
                        .finalized_features
                        .extend(config.new_cluster_features.clone());
                    opened.log.append_records(vec![MetadataRecord::Cluster {
                        cluster: cluster.clone(),
                    }])?;
                }
                let core = ControllerCore::from_image(opened.image, config)
                    .map_err(|e| invalid_data(format!("{}: {e}", opened.log.describe())))?;
                (core, opened.cluster_id, Some(opened.log))
            }
            None => {
                // In memory: always a new cluster.
                let mut image = crate::model::MetadataImage::default();
                image
                    .cluster
                    .finalized_features
                    .extend(config.new_cluster_features.clone());
                let core = ControllerCore::from_image(image, config).map_err(invalid_data)?;
                (core, new_cluster_id(), None)
            }
        };
        let state = State {
            core,
            cluster_id,
            log,
            links: BTreeMap::new(),
            view_stale: false,
            untrimmed_records: 0,
            last_trim: std::time::Instant::now(),
        };
        let mut first = full_view(&state.core, &state.cluster_id);
        first.version = 1;
        let view = RwLock::new(Arc::new(first));
        let elections = prometheus::IntCounterVec::new(
            prometheus::Opts::new(
                "skein_controller_leader_elections_total",
                "Partition leaders the controller elected after the first, by kind: clean (from the ISR), unclean (outside it), unclean_recovery (the longest log when no ISR or ELR member was left), preferred (back to the first replica).",
            ),
            &["kind"],
        )
        .expect("metric");
        for kind in ELECTION_KINDS {
            elections.with_label_values(&[kind]);
        }
        let storage_lost = prometheus::IntCounter::new(
            "skein_controller_broker_storage_lost_total",
            "Registrations of a broker with another log directory id than before (a lost disk or a new volume): its replicas had to be copied again.",
        )
        .expect("metric");
        let self_healing = prometheus::IntCounter::new(
            "skein_controller_self_healing_reassignments_total",
            "Partitions whose replicas on a broker lost past the self-healing grace period were reassigned to other brokers.",
        )
        .expect("metric");
        Ok(Arc::new(Self {
            state: Mutex::new(state),
            view,
            history: Mutex::new(std::collections::VecDeque::from([(1, None)])),
            published: tokio::sync::watch::channel(0).0,
            elections,
            storage_lost,
            self_healing,
            clock,
            contacts: Mutex::new(std::collections::HashMap::new()),
            recoveries: Mutex::new(Vec::new()),
        }))
    }

    /// The unclean recoveries since the last call, for the platform to
    /// report (Kubernetes Events, the cluster's status).
    pub fn take_recoveries(&self) -> Vec<crate::unclean_recovery::RecoveryNote> {
        std::mem::take(&mut *self.recoveries.lock().expect("recoveries lock"))
    }

    /// Turns self-healing on or off or changes it (the cluster's spec
    /// changed); takes effect at the next tick.
    pub fn set_self_healing(&self, config: Option<crate::config::SelfHealingConfig>) {
        let mut st = self.state.lock().expect("controller lock");
        if st.core.config().self_healing != config {
            st.core.set_self_healing(config);
        }
    }

    /// Since when each fenced broker has been gone (the controller's clock,
    /// milliseconds): what self-healing's grace period counts from.
    pub fn lost_since(&self) -> std::collections::BTreeMap<i32, u64> {
        self.state
            .lock()
            .expect("controller lock")
            .core
            .lost_since()
            .clone()
    }

    /// The latest published metadata.
    pub fn view(&self) -> Arc<ClusterView> {
        self.view.read().expect("view lock").clone()
    }

    /// Connects a broker: instructions for it are delivered to `link`.
    pub fn attach(&self, broker: i32, link: Arc<dyn BrokerLink>) {
        self.state
            .lock()
            .expect("controller lock")
            .links
            .insert(broker, link);
    }

    /// Disconnects a broker (it stopped or crashed).
    pub fn detach(&self, broker: i32) {
        self.state
            .lock()
            .expect("controller lock")
            .links
            .remove(&broker);
    }

    /// Runs one event through the core: persists the new image before
    /// anyone sees it, publishes the view, delivers instructions, and
    /// returns the replies.
    pub fn handle(&self, event: Event) -> Result<Vec<Reply>, ControlPlaneError> {
        if let Event::BrokerHeartbeat {
            broker,
            broker_epoch,
        } = &event
        {
            let arrived = (self.clock)();
            self.contacts
                .lock()
                .expect("contacts lock")
                .insert(*broker, (*broker_epoch, arrived));
        }
        let mut guard = self.state.lock().expect("controller lock");
        let st = &mut *guard;
        let contacts = std::mem::take(&mut *self.contacts.lock().expect("contacts lock"));
        for (broker, (epoch, at_ms)) in contacts {
            st.core.note_contact(broker, epoch, at_ms);
        }
        let kind = EventKind {
            name: event.name(),
            rebalancing: matches!(event, Event::Tick | Event::ElectLeaders { .. }),
            config_topic: match &event {
                Event::TopicConfigChanged { topic, .. } => Some(topic.clone()),
                _ => None,
            },
            broker_configs: matches!(event, Event::AlterBrokerConfigs { .. }),
        };
        let mut timing = EventTiming::start();
        let commands = st.core.handle_first_step(event, (self.clock)());
        timing.lap("core");
        let (replies, mut slow) = self.carry_out(st, commands, &kind, timing)?;
        // A broker's fencing, second step: it leaves the ISRs of what it
        // did not lead. The first step's new leaders are published and on
        // their way to the brokers already.
        if st.core.has_unfinished_fencing() {
            let mut timing = EventTiming::start();
            let commands = st.core.finish_fencing((self.clock)());
            timing.lap("core");
            let kind = EventKind {
                name: "FencedBrokersLeaveIsrs",
                ..EventKind::default()
            };
            slow |= self.carry_out(st, commands, &kind, timing)?.1;
        }
        // Memory goes back after a slow event, and a few seconds after a
        // run of quick ones (the ISR expansions of a broker catching up at
        // 100,000 partitions are 50 events of 2,000 records, each under the
        // slow mark, whose garbage took the controller from 156 to 226 MiB
        // once brokers answered faster); the periodic Tick ends a run.
        let trim =
            slow || (st.untrimmed_records > 0 && st.last_trim.elapsed() >= TRIM_AFTER_QUICK_EVENTS);
        if trim {
            st.untrimmed_records = 0;
            st.last_trim = std::time::Instant::now();
        }
        drop(guard);
        if trim {
            release_free_memory();
        }
        Ok(replies)
    }

    /// Persists `commands`' records, publishes the view, delivers the
    /// instructions; the replies, and whether it was slow.
    fn carry_out(
        &self,
        st: &mut State,
        commands: Vec<Command>,
        kind: &EventKind,
        mut timing: EventTiming,
    ) -> Result<(Vec<Reply>, bool), ControlPlaneError> {
        let rebalancing = kind.rebalancing;
        let mut replies = Vec::new();
        let mut records = Vec::new();
        let mut changed_topics = BTreeSet::new();
        let mut changed_rest = false;
        let mut publish = false;
        let mut changes: BTreeMap<i32, Vec<PartitionChange>> = BTreeMap::new();
        for c in commands {
            match c {
                // The most frequent command by far (one per partition a
                // broker loss changes): moved into its record, not copied.
                Command::PersistPartition {
                    topic,
                    partition,
                    state,
                    ..
                } => {
                    if !changed_topics.contains(&topic) {
                        changed_topics.insert(topic.clone());
                    }
                    records.push(MetadataRecord::Partition {
                        topic,
                        partition,
                        state,
                    });
                }
                Command::PersistBroker(_)
                | Command::PersistTopic(_)
                | Command::DeleteTopic { .. }
                | Command::PersistCluster(_)
                | Command::PersistScramCredentials { .. }
                | Command::PersistDelegationToken { .. }
                | Command::PersistResourceConfigs { .. }
                | Command::PersistClientQuotas(_)
                | Command::PersistBrokerConfigs(_)
                | Command::PersistAcls(_) => {
                    match &c {
                        Command::PersistTopic(spec) => {
                            changed_topics.insert(spec.name.clone());
                        }
                        Command::DeleteTopic { topic, .. } => {
                            changed_topics.insert(topic.clone());
                        }
                        _ => changed_rest = true,
                    }
                    records.extend(MetadataRecord::from_command(&c))
                }
                Command::BrokerStorageLost {
                    broker,
                    previous,
                    current,
                    replicas,
                } => {
                    self.storage_lost.inc();
                    tracing::warn!(
                        broker,
                        previous_directory = %previous,
                        directory = %current,
                        replicas,
                        "broker came back with an empty log directory: its replicas left every ISR and ELR and are copied back from the leaders"
                    )
                }
                Command::SelfHealing {
                    lost,
                    started,
                    blocked,
                } => {
                    self.self_healing.inc_by(u64::from(started));
                    if started > 0 {
                        tracing::warn!(?lost, partitions = started, "self-healing: replicas of lost brokers are re-created on other brokers");
                    }
                    for (why, partitions) in &blocked {
                        tracing::warn!(?lost, partitions, reason = %why, "self-healing cannot restore these partitions' replication factor");
                    }
                }
                Command::UncleanLeaderElection {
                    topic,
                    partition,
                    leader,
                    ..
                } => {
                    self.elections.with_label_values(&["unclean"]).inc();
                    tracing::warn!(topic, partition, leader, "unclean leader election")
                }
                Command::UncleanRecovery {
                    topic,
                    partition,
                    leader,
                    leader_epoch,
                    last_leader_epoch,
                    log_end_offset,
                    highest_reported_offset,
                    unreported,
                    ..
                } => {
                    self.elections
                        .with_label_values(&["unclean_recovery"])
                        .inc();
                    tracing::warn!(
                        topic,
                        partition,
                        leader,
                        leader_epoch,
                        last_leader_epoch,
                        log_end_offset,
                        highest_reported_offset,
                        ?unreported,
                        "unclean recovery: no ISR or ELR member was left; the longest log leads. Offsets from log_end_offset to highest_reported_offset (and whatever the unreported replicas held) may be lost"
                    );
                    let mut kept = self.recoveries.lock().expect("recoveries lock");
                    if kept.len() >= 64 {
                        kept.remove(0);
                    }
                    kept.push(crate::unclean_recovery::RecoveryNote {
                        topic,
                        partition,
                        leader,
                        leader_epoch,
                        log_end_offset,
                        highest_reported_offset,
                        unreported,
                    });
                }
                Command::BecomeLeader {
                    broker,
                    topic,
                    partition,
                    leader_epoch,
                    partition_epoch,
                    replicas,
                    isr,
                    ..
                } => {
                    if leader_epoch > 0 {
                        let kind = if rebalancing && replicas.first() == Some(&broker) {
                            "preferred"
                        } else {
                            "clean"
                        };
                        self.elections.with_label_values(&[kind]).inc();
                    }
                    changes
                        .entry(broker)
                        .or_default()
                        .push(PartitionChange::Leader {
                            topic,
                            partition: partition as i32,
                            leader_epoch,
                            partition_epoch,
                            replicas,
                            isr,
                        });
                }
                Command::BecomeFollower {
                    broker,
                    topic,
                    partition,
                    leader,
                    leader_epoch,
                    partition_epoch,
                    replicas,
                    ..
                } => changes
                    .entry(broker)
                    .or_default()
                    .push(PartitionChange::Follower {
                        topic,
                        partition: partition as i32,
                        leader,
                        leader_epoch,
                        partition_epoch,
                        replicas,
                    }),
                Command::StopReplica {
                    broker,
                    topic,
                    partition,
                    delete,
                    ..
                } => changes
                    .entry(broker)
                    .or_default()
                    .push(PartitionChange::Stop {
                        topic,
                        partition: partition as i32,
                        delete,
                    }),
                Command::Reply(r) => replies.push(r),
                Command::PublishMetadata => publish = true,
            }
        }
        let persist = !records.is_empty();
        let record_count = records.len();
        st.untrimmed_records += record_count;
        timing.lap("commands");
        if let Some(log) = &mut st.log {
            if let Err(e) = log.append_records(records) {
                st.view_stale = true;
                return Err(ControlPlaneError::Storage(e.to_string()));
            }
        }
        timing.lap("log");
        if persist || publish || !changes.is_empty() || st.view_stale {
            if std::mem::take(&mut st.view_stale) {
                self.publish_view(full_view(&st.core, &st.cluster_id), None);
            } else {
                let view = updated_view(
                    &st.core,
                    &st.cluster_id,
                    &self.view(),
                    &changed_topics,
                    changed_rest,
                );
                self.publish_view(view, Some(changed_topics));
            }
        }
        timing.lap("view");
        let instructions: usize = changes.values().map(Vec::len).sum();
        for (broker, list) in changes {
            if let Some(link) = st.links.get(&broker) {
                link.deliver(list);
            }
        }
        timing.lap("deliver");
        if let Some(topic) = kind.config_topic.as_ref().filter(|_| persist) {
            for link in st.links.values() {
                link.topic_configs_changed(vec![topic.clone()]);
            }
        }
        if kind.broker_configs && persist {
            for link in st.links.values() {
                link.broker_configs_changed();
            }
        }
        // Compaction last: everything above is committed and delivered.
        if let Some(log) = &mut st.log {
            if let Err(e) = log.compact_if_due(st.core.image()) {
                tracing::warn!(error = %e, "cannot write a metadata snapshot; the log keeps growing until one succeeds");
            }
        }
        timing.lap("snapshot");
        let slow = timing.report(kind.name, record_count, instructions);
        Ok((replies, slow))
    }

    /// Sends `Tick` every `every` so brokers that stop heartbeating are
    /// fenced and their partitions get new leaders.
    pub fn spawn_ticker(self: &Arc<Self>, every: Duration) -> tokio::task::JoinHandle<()> {
        let me = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                let Some(me) = me.upgrade() else { return };
                if let Err(e) = me.handle(Event::Tick) {
                    tracing::warn!(error = %e, "controller tick failed");
                }
            }
        })
    }

    /// The finalized level of `feature` ([`crate::features`]).
    pub fn feature_level(&self, feature: &str) -> i16 {
        self.state
            .lock()
            .expect("controller lock")
            .core
            .image()
            .cluster
            .feature_level(feature)
    }

    /// The registered brokers (a copy of the image's, without its
    /// partitions).
    pub fn brokers(&self) -> BTreeMap<i32, BrokerInfo> {
        self.state
            .lock()
            .expect("controller lock")
            .core
            .image()
            .brokers
            .clone()
    }

    /// Why broker `broker`'s latest registration was refused, if it has
    /// not registered since (its release cannot run at the finalized
    /// feature level).
    pub fn refused_registration(&self, broker: i32) -> Option<String> {
        self.state
            .lock()
            .expect("controller lock")
            .core
            .refused_registrations()
            .get(&broker)
            .cloned()
    }

    /// The core's image (for tests and diagnostics).
    pub fn image(&self) -> MetadataImage {
        self.state
            .lock()
            .expect("controller lock")
            .core
            .image()
            .clone()
    }
}

impl ControlPlane for ControllerService {
    fn view(&self) -> Arc<ClusterView> {
        ControllerService::view(self)
    }
    fn handle(&self, event: Event) -> Result<Vec<Reply>, ControlPlaneError> {
        ControllerService::handle(self, event)
    }
    fn attach(&self, broker: i32, link: Arc<dyn BrokerLink>) {
        ControllerService::attach(self, broker, link)
    }
    fn detach(&self, broker: i32) {
        ControllerService::detach(self, broker)
    }
    fn is_local(&self) -> bool {
        true
    }
}

/// How many recent views remember what they changed.
const HISTORY: usize = 1024;

fn invalid_data(e: impl ToString) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string())
}

fn new_cluster_id() -> String {
    // Kafka cluster ids are 16 random bytes in URL-safe base64 without padding.
    kafka_base64(Uuid::new_v4().into_bytes())
}
