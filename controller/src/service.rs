//! [`ControllerService`]: the controller core with its I/O around it —
//! the persisted image ([`ImageStore`]), the published [`ClusterView`], and
//! delivery of partition instructions to the brokers attached to it.
//!
//! A single `skein-broker` runs one for itself (combined mode, image in
//! `<data-dir>/cluster-metadata.json`); the operator runs one per cluster
//! (image in a file for the `local` platform, in a ConfigMap on
//! Kubernetes); tests run one for several in-process brokers. Events are
//! handled one at a time under a lock, and the instructions they produce are
//! delivered before the lock is released, so every broker sees them in the
//! controller's order.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::plane::{BrokerLink, ControlPlane, ControlPlaneError, PartitionChange};
use crate::view::{kafka_base64, BrokerView, ClusterView, PartitionView, TopicView};
use crate::{
    Command, ControllerConfig, ControllerCore, ControllerError, Event, MetadataImage, Reply,
};

/// The file the image is kept in.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct PersistedMetadata {
    cluster_id: String,
    image: MetadataImage,
}

/// Where the controller keeps its image: a file for a broker or the local
/// platform, a ConfigMap on Kubernetes. `save` is called under the
/// controller's lock before any instruction derived from the change goes out,
/// so it must be durable when it returns.
pub trait ImageStore: Send + Sync {
    /// The bytes last saved, `None` when nothing was ever saved.
    fn load(&self) -> std::io::Result<Option<Vec<u8>>>;
    fn save(&self, bytes: &[u8]) -> std::io::Result<()>;
    /// For error messages.
    fn describe(&self) -> String;
}

/// [`ImageStore`] in one file, replaced atomically.
pub struct FileImageStore(pub PathBuf);

impl ImageStore for FileImageStore {
    fn load(&self) -> std::io::Result<Option<Vec<u8>>> {
        match std::fs::read(&self.0) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }
    fn save(&self, bytes: &[u8]) -> std::io::Result<()> {
        write_atomic(&self.0, bytes)
    }
    fn describe(&self) -> String {
        self.0.display().to_string()
    }
}

struct State {
    core: ControllerCore,
    cluster_id: String,
    store: Option<Box<dyn ImageStore>>,
    links: BTreeMap<i32, Arc<dyn BrokerLink>>,
}

/// The controller core, persisted and connected to its brokers.
pub struct ControllerService {
    state: Mutex<State>,
    /// Published before instructions are delivered, so a broker applying
    /// one finds the topic it refers to. Separate from `state` so a broker
    /// can read it while the controller is delivering.
    view: RwLock<Arc<ClusterView>>,
    published: tokio::sync::watch::Sender<u64>,
    /// `skein_controller_leader_elections_total{kind}`: clean, unclean,
    /// preferred (registered by whoever exports the controller's metrics).
    pub elections: prometheus::IntCounterVec,
    /// `skein_controller_broker_storage_lost_total`: brokers that came back
    /// with another log directory (registered like `elections`).
    pub storage_lost: prometheus::IntCounter,
    /// Milliseconds for the core (it only compares them).
    clock: Clock,
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
    fn publish_view(&self, view: ClusterView) {
        *self.view.write().expect("view lock") = Arc::new(view);
        self.published.send_modify(|n| *n += 1);
    }

    /// Completes a `changed()` each time a new view is published.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.published.subscribe()
    }

    /// A controller whose image lives in `path` (created when missing), or
    /// only in memory when `path` is `None`.
    pub fn open(path: Option<&Path>, config: ControllerConfig) -> std::io::Result<Arc<Self>> {
        let store = path.map(|p| Box::new(FileImageStore(p.to_path_buf())) as Box<dyn ImageStore>);
        Self::open_store(store, config)
    }

    /// A controller whose image lives in `store` (an empty cluster with a
    /// new cluster id when the store holds nothing yet).
    pub fn open_store(
        store: Option<Box<dyn ImageStore>>,
        config: ControllerConfig,
    ) -> std::io::Result<Arc<Self>> {
        Self::open_with_clock(store, config, system_clock())
    }

    /// [`Self::open_store`] with the time the core sees coming from `clock`.
    pub fn open_with_clock(
        store: Option<Box<dyn ImageStore>>,
        config: ControllerConfig,
        clock: Clock,
    ) -> std::io::Result<Arc<Self>> {
        let loaded = match &store {
            Some(store) => match store.load()? {
                Some(bytes) => {
                    let invalid = |e: String| {
                        std::io::Error::new(
                            std::io::ErrorKind::InvalidData,
                            format!("{}: {e}", store.describe()),
                        )
                    };
                    let p: PersistedMetadata =
                        serde_json::from_slice(&bytes).map_err(|e| invalid(e.to_string()))?;
                    let core = ControllerCore::from_image(p.image, config.clone())
                        .map_err(|e| invalid(e.to_string()))?;
                    Some((core, p.cluster_id))
                }
                None => None,
            },
            None => None,
        };
        let (core, cluster_id) =
            loaded.unwrap_or_else(|| (ControllerCore::new(config), new_cluster_id()));
        let state = State {
            core,
            cluster_id,
            store,
            links: BTreeMap::new(),
        };
        let view = RwLock::new(Arc::new(build_view(&state)));
        let elections = prometheus::IntCounterVec::new(
            prometheus::Opts::new(
                "skein_controller_leader_elections_total",
                "Partition leaders the controller elected after the first, by kind: clean (from the ISR), unclean (outside it), preferred (back to the first replica).",
            ),
            &["kind"],
        )
        .expect("metric");
        for kind in ["clean", "unclean", "preferred"] {
            elections.with_label_values(&[kind]);
        }
        let storage_lost = prometheus::IntCounter::new(
            "skein_controller_broker_storage_lost_total",
            "Registrations of a broker with another log directory id than before (a lost disk or a new volume): its replicas had to be copied again.",
        )
        .expect("metric");
        Ok(Arc::new(Self {
            state: Mutex::new(state),
            view,
            published: tokio::sync::watch::channel(0).0,
            elections,
            storage_lost,
            clock,
        }))
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
        let mut st = self.state.lock().expect("controller lock");
        let rebalancing = matches!(event, Event::Tick | Event::ElectLeaders { .. });
        let config_topic = match &event {
            Event::TopicConfigChanged { topic, .. } => Some(topic.clone()),
            _ => None,
        };
        let broker_configs = matches!(event, Event::AlterBrokerConfigs { .. });
        let commands = st.core.handle(event, (self.clock)());
        let mut replies = Vec::new();
        let mut persist = false;
        let mut publish = false;
        let mut changes: BTreeMap<i32, Vec<PartitionChange>> = BTreeMap::new();
        for c in commands {
            match c {
                Command::PersistBroker(_)
                | Command::PersistTopic(_)
                | Command::PersistPartition { .. }
                | Command::DeleteTopic { .. }
                | Command::PersistCluster(_)
                | Command::PersistScramCredentials { .. }
                | Command::PersistClientQuotas(_)
                | Command::PersistBrokerConfigs(_)
                | Command::PersistAcls(_) => persist = true,
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
                Command::UncleanLeaderElection {
                    topic,
                    partition,
                    leader,
                    ..
                } => {
                    self.elections.with_label_values(&["unclean"]).inc();
                    tracing::warn!(topic, partition, leader, "unclean leader election")
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
        if persist {
            if let Some(store) = &st.store {
                let bytes = serde_json::to_vec_pretty(&PersistedMetadata {
                    cluster_id: st.cluster_id.clone(),
                    image: st.core.image().clone(),
                })
                .expect("serializable");
                store
                    .save(&bytes)
                    .map_err(|e| ControlPlaneError::Storage(e.to_string()))?;
            }
        }
        if persist || publish || !changes.is_empty() {
            self.publish_view(build_view(&st));
        }
        for (broker, list) in changes {
            if let Some(link) = st.links.get(&broker) {
                link.deliver(list);
            }
        }
        if let Some(topic) = config_topic.filter(|_| persist) {
            for link in st.links.values() {
                link.topic_configs_changed(vec![topic.clone()]);
            }
        }
        if broker_configs && persist {
            for link in st.links.values() {
                link.broker_configs_changed();
            }
        }
        Ok(replies)
    }

    /// Handles `event` and returns the reply `pick` selects.
    pub fn request<T>(
        &self,
        event: Event,
        pick: impl Fn(Reply) -> Option<Result<T, ControllerError>>,
    ) -> Result<T, ControlPlaneError> {
        crate::plane::request(self, event, pick)
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

/// The view of the controller's image brokers and platforms read.
fn build_view(st: &State) -> ClusterView {
    let core = &st.core;
    let topics = core
        .topics()
        .iter()
        .map(|(name, t)| {
            let meta = TopicView {
                name: name.clone(),
                id: Uuid::from_u128(t.spec.topic_id.0),
                partitions: t
                    .partitions
                    .iter()
                    .map(|p| PartitionView {
                        replicas: p.replicas.clone(),
                        isr: p.isr.clone(),
                        leader: p.leader,
                        leader_epoch: p.leader_epoch,
                        adding_replicas: p.adding_replicas.clone(),
                        removing_replicas: p.removing_replicas.clone(),
                        elr: p.elr.clone(),
                    })
                    .collect(),
                configs: t.spec.configs.clone(),
            };
            (name.clone(), Arc::new(meta))
        })
        .collect();
    let brokers: BTreeMap<i32, BrokerView> = core
        .brokers()
        .values()
        .map(|b| {
            (
                b.id,
                BrokerView {
                    id: b.id,
                    host: b.host.clone(),
                    port: b.port,
                    rack: b.rack.clone(),
                    alive: b.is_alive(),
                    storage_lost: b.storage_lost,
                    storage_losses: b.storage_losses,
                    endpoints: b.endpoints.clone(),
                },
            )
        })
        .collect();
    // Every broker forwards admin requests to the controller, so any live
    // one can be named controller; clients only need a stable answer.
    let controller_id = brokers
        .values()
        .find(|b| b.alive)
        .map(|b| b.id)
        .unwrap_or(-1);
    ClusterView {
        cluster_id: st.cluster_id.clone(),
        topics,
        topic_names_by_id: Default::default(),
        brokers,
        controller_id,
        scram_credentials: Arc::new(core.scram_credentials().clone()),
        client_quotas: Arc::new(core.client_quotas().clone()),
        acls: Arc::new(core.acls().clone()),
        broker_configs: Arc::new(core.broker_configs().clone()),
    }
    .index_ids()
}

fn new_cluster_id() -> String {
    // Kafka cluster ids are 16 random bytes in URL-safe base64 without padding.
    kafka_base64(Uuid::new_v4().into_bytes())
}

/// Writes `bytes` to `path` so that a crash leaves the old or the new file.
fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
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
