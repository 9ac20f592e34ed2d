//! The controller core on the `kubernetes` platform: one
//! [`ControllerService`] per `KafkaCluster`, inside the operator process.
//!
//! - Its metadata log (topics, partitions, leaders, ISRs, epochs,
//!   producer-id blocks) lives in ConfigMaps ([`crate::metadata_store`]):
//!   a head `<cluster>-controller`, replaced with a `resourceVersion`
//!   precondition before any instruction derived from a change goes out (a
//!   second writer, a stale operator replica, gets a conflict instead of
//!   overwriting newer state), and blobs of records it names.
//! - It holds a session with every broker pod, dialled at the pod's stable
//!   DNS name and control port. A broker whose session breaks (pod deleted,
//!   process gone) is reported lost at once, so its partitions get new
//!   leaders without waiting for a timeout. Sessions are mutual TLS with
//!   the cluster's control-plane certificates ([`crate::control_tls`]),
//!   each new one with the newest.
//! - Every published view is mirrored into the `.status` of the cluster's
//!   Topic resources, and a topic created through the Kafka API gets a
//!   Topic resource ([`crate::topic_mirror`]).
//! - A Topic's spec reaches it through [`ClusterController::ensure_topic`]:
//!   create, add partitions, change the replication factor, change configs.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use kube::{Client, Resource};
use skein_controller::rpc::maintain_session;
use skein_controller::rpc::tls::ClientTls;
use skein_controller::{ControlPlaneError, ControllerError, ControllerService};

use crate::error::ControllerStartError;
use skein_controller::requests as req;
use skein_controller::{Call, ControllerConfig, NewTopic, TopicId};
use skein_crds::{KafkaCluster, TopicSpec};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::{info, warn};

use crate::control_tls::{ControlTls, Lifetimes};
use crate::manifests::ClusterNames;

pub use crate::metadata_store::metadata_config_map;

/// What [`ClusterController::ensure_topic`] did about the replication factor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplicationFactorStep {
    /// Every partition has the spec's number of replicas, or a running
    /// reassignment heads for it.
    InPlace,
    /// Reassignments to the spec's replication factor started for this many
    /// partitions.
    Started(u32),
    /// The controller cannot start it now (fewer live brokers than
    /// replicas, a partition without an in-sync replica); asked again on
    /// the next reconcile.
    Blocked(String),
}

/// The controller of one KafkaCluster and its broker sessions.
pub struct ClusterController {
    pub controller: Arc<ControllerService>,
    names: ClusterNames,
    control_port: i32,
    sessions: Mutex<BTreeMap<i32, watch::Sender<bool>>>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
    /// The pod a rolling restart deleted last, until its broker is back.
    pub restarting: Mutex<Option<Restart>>,
    /// Mutual TLS of the sessions.
    tls: Arc<SessionTls>,
    /// The key its metadata log seals SCRAM credentials with (written back
    /// to its Secret if that is deleted while the controller runs).
    key: skein_controller::SealingKey,
}

/// The TLS settings of a cluster's sessions, asked for on every connection
/// attempt: renewed certificates serve the next session, open ones go on.
struct SessionTls {
    current: std::sync::RwLock<ControlTls>,
    /// Brokers whose pods still serve the control port in plaintext (made
    /// by a release before it was always mutual TLS), until the roll
    /// replaces them ([`crate::control_tls::plaintext_brokers`]).
    plaintext: std::sync::RwLock<BTreeSet<i32>>,
    /// A pod list showed none: the operator's StatefulSet makes no such pod,
    /// so the pods are not listed again.
    all_tls: AtomicBool,
}

impl SessionTls {
    fn for_broker(&self, id: i32) -> Option<Arc<rustls::ClientConfig>> {
        if self.plaintext.read().expect("plaintext lock").contains(&id) {
            return None;
        }
        Some(self.current.read().expect("tls lock").config.clone())
    }
}

/// A pod deleted by a rolling restart: done once a pod of that name with
/// another uid is ready and its broker registered again (a higher epoch).
#[derive(Clone, Debug)]
pub struct Restart {
    pub pod: String,
    pub uid: String,
    pub broker: i32,
    pub broker_epoch: u64,
    /// When the pod was deleted (`spec.rollPolicy.timeout` runs from it).
    pub since: std::time::Instant,
    pub restarted_at: Time,
    /// The image its successor is to run.
    pub image: String,
}

impl Restart {
    /// The record `status.roll` keeps of the pod restarted last, for an
    /// operator that takes over a roll another one started (a failover):
    /// it goes on waiting for that pod, and `spec.rollPolicy.timeout` runs
    /// from the restart, not from the takeover. `None` without a pod
    /// restarted (or from an operator that did not record one).
    pub fn from_status(roll: &skein_crds::RollStatus, now: &Time) -> Option<Restart> {
        let pod = roll.pod.clone()?;
        let restarted_at = roll.restarted_at.clone()?;
        let broker = pod.rsplit_once('-')?.1.parse().ok()?;
        let ago = Duration::try_from(now.0.duration_since(restarted_at.0)).unwrap_or_default();
        Some(Restart {
            uid: roll.pod_uid.clone()?,
            broker,
            broker_epoch: roll.broker_epoch.unwrap_or_default().max(0) as u64,
            since: std::time::Instant::now()
                .checked_sub(ago)
                .unwrap_or_else(std::time::Instant::now),
            restarted_at,
            image: roll.image.clone()?,
            pod,
        })
    }
}

impl ClusterController {
    /// `http://<pod>.<headless service>.<namespace>.svc:<control port>`.
    pub fn broker_endpoint(&self, id: i32) -> String {
        format!(
            "http://{}-{id}.{}.{}.svc:{}",
            self.names.statefulset(),
            self.names.headless_service(),
            self.names.namespace,
            self.control_port
        )
    }

    /// `<pod>.<headless service>.<namespace>.svc:<port>` of broker `id`.
    pub fn broker_host_port(&self, id: i32, port: i32) -> String {
        self.names.broker_host_port(id, port)
    }

    /// Keeps a session with brokers `0..replicas` and ends those with the
    /// brokers beyond (their pods are gone after a scale-down).
    pub fn set_brokers(&self, replicas: i32) {
        let mut sessions = self.sessions.lock().expect("sessions lock");
        let gone: Vec<i32> = sessions.range(replicas..).map(|(id, _)| *id).collect();
        for id in gone {
            if let Some(tx) = sessions.remove(&id) {
                info!(broker = id, "controller session ended (broker removed)");
                let _ = tx.send(true);
            }
        }
        for id in 0..replicas {
            if sessions.contains_key(&id) {
                continue;
            }
            let (tx, rx) = watch::channel(false);
            let endpoint = self.broker_endpoint(id);
            let shared = self.tls.clone();
            let tls: ClientTls = Arc::new(move || shared.for_broker(id));
            info!(broker = id, %endpoint, tls = tls().is_some(), "controller session");
            self.tasks
                .lock()
                .expect("tasks lock")
                .push(tokio::spawn(maintain_session(
                    self.controller.clone(),
                    endpoint,
                    Some(id),
                    rx,
                    None,
                    tls,
                )));
            sessions.insert(id, tx);
        }
    }

    /// Takes new certificates for the sessions opened from now on (renewed,
    /// or a new CA); open sessions go on with theirs.
    pub fn set_tls(&self, tls: ControlTls) {
        let mut current = self.tls.current.write().expect("tls lock");
        if current.fingerprint != tls.fingerprint {
            info!(cluster = %self.names.cluster, namespace = %self.names.namespace,
                "control-plane certificates changed: the next sessions use them");
        }
        // Also when only the brokers' certificate changed: its renewal time.
        *current = tls;
    }

    /// When the control plane's certificates are next due for renewal.
    pub fn tls_renewal_in(&self) -> Duration {
        let at = self.tls.current.read().expect("tls lock").renew_at;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        Duration::from_secs(at.saturating_sub(now).max(1) as u64)
    }

    /// Looks again at which brokers' pods serve the control port in
    /// plaintext, until none does.
    async fn refresh_plaintext(&self, client: &Client) -> Result<(), ControllerStartError> {
        if self.tls.all_tls.load(Ordering::Relaxed) {
            return Ok(());
        }
        let now = crate::control_tls::plaintext_brokers(client, &self.names).await?;
        self.set_plaintext(now);
        Ok(())
    }

    fn set_plaintext(&self, now: BTreeSet<i32>) {
        let mut plaintext = self.tls.plaintext.write().expect("plaintext lock");
        if *plaintext != now {
            info!(cluster = %self.names.cluster, namespace = %self.names.namespace,
                brokers = ?now, "brokers whose pods serve the control port in plaintext until they roll");
        }
        if now.is_empty() {
            self.tls.all_tls.store(true, Ordering::Relaxed);
        }
        *plaintext = now;
    }

    fn stop(&self) {
        for tx in self.sessions.lock().expect("sessions lock").values() {
            let _ = tx.send(true);
        }
        for t in self.tasks.lock().expect("tasks lock").drain(..) {
            t.abort();
        }
    }

    /// Creates the topic, or brings it to the spec: its replication factor
    /// (a reassignment of every partition whose target has another number
    /// of replicas), its partition count, its configs. The replication
    /// factor goes first so partitions added with it are placed at the new
    /// one. A replication factor the controller cannot reach now is
    /// reported, not an error: the rest of the spec is still applied.
    pub fn ensure_topic(
        &self,
        spec: &TopicSpec,
        kafka_name: &str,
    ) -> Result<ReplicationFactorStep, ControlPlaneError> {
        let view = self.controller.view();
        let configs: BTreeMap<String, String> = spec.config.clone();
        let Some(meta) = view.topics.get(kafka_name) else {
            let mut t = NewTopic::new(
                kafka_name,
                TopicId(uuid::Uuid::new_v4().as_u128()),
                spec.partitions.max(1) as u32,
                spec.replication_factor.max(1) as u16,
            );
            t.configs = configs;
            self.controller.call(t)?;
            info!(topic = kafka_name, "topic created by the controller");
            return Ok(ReplicationFactorStep::InPlace);
        };
        let step = self.ensure_replication_factor(meta, spec.replication_factor)?;
        if (meta.partitions.len() as i32) < spec.partitions {
            self.controller.call(req::CreatePartitions {
                topic: kafka_name.to_string(),
                count: spec.partitions as u32,
                assignment: None,
            })?;
            info!(
                topic = kafka_name,
                partitions = spec.partitions,
                "partitions added"
            );
        }
        // The throttle lists of a running move (the controller's own, or
        // kafka-reassign-partitions') stay while the topic has one, unless
        // the spec names them; once nothing moves the spec decides.
        let mut configs = configs;
        let moving = meta
            .partitions
            .iter()
            .any(|p| !p.adding_replicas.is_empty() || !p.removing_replicas.is_empty());
        for key in [
            skein_controller::replication_throttle::LEADER_REPLICAS,
            skein_controller::replication_throttle::FOLLOWER_REPLICAS,
        ] {
            if let (true, false, Some(v)) =
                (moving, configs.contains_key(key), meta.configs.get(key))
            {
                configs.insert(key.to_owned(), v.clone());
            }
        }
        if meta.configs != configs {
            self.controller.call(req::AlterConfigs {
                topic: kafka_name.to_string(),
                configs,
            })?;
            info!(topic = kafka_name, "topic configs changed");
        }
        Ok(step)
    }

    /// Asks the controller for `rf` replicas per partition when a
    /// partition's target (its replicas, less those a running reassignment
    /// removes) has another number. The controller's refusals come back as
    /// [`ReplicationFactorStep::Blocked`]; failures to reach or persist it
    /// as errors.
    fn ensure_replication_factor(
        &self,
        meta: &skein_controller::TopicView,
        rf: i32,
    ) -> Result<ReplicationFactorStep, ControlPlaneError> {
        let want = usize::try_from(rf.max(1)).unwrap_or(1);
        let settled = meta
            .partitions
            .iter()
            .all(|p| p.replicas.len() - p.removing_replicas.len() == want);
        if settled {
            return Ok(ReplicationFactorStep::InPlace);
        }
        let r = self.controller.call(req::AlterReplicationFactor {
            topic: meta.name.clone(),
            replication_factor: u16::try_from(want).unwrap_or(u16::MAX),
        });
        match r {
            Ok(partitions) => {
                info!(topic = %meta.name, replication_factor = want, partitions, "replication factor change started");
                Ok(ReplicationFactorStep::Started(partitions))
            }
            Err(ControlPlaneError::Controller(e)) => {
                warn!(topic = %meta.name, replication_factor = want, error = %e, "replication factor change refused for now");
                Ok(ReplicationFactorStep::Blocked(e.to_string()))
            }
            Err(e) => Err(e),
        }
    }

    /// Deletes the topic and its data; a topic the controller does not know
    /// counts as deleted.
    pub fn delete_topic(&self, kafka_name: &str) -> Result<(), ControlPlaneError> {
        if !self.controller.view().topics.contains_key(kafka_name) {
            return Ok(());
        }
        let r = self.controller.call(req::DeleteTopic {
            topic: kafka_name.to_string(),
        });
        match r {
            Ok(()) => Ok(()),
            Err(ControlPlaneError::Controller(ControllerError::UnknownTopicOrPartition)) => Ok(()),
            Err(e) => Err(e),
        }
    }
}

impl Drop for ClusterController {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Every cluster's [`ClusterController`], by namespace and name.
pub struct ClusterControllers {
    config: kube::Config,
    client: Client,
    metrics: crate::metrics::Metrics,
    session_timeout_ms: u64,
    /// How long the control planes' certificates live.
    control_certs: Lifetimes,
    clusters: Mutex<HashMap<(String, String), Arc<ClusterController>>>,
    /// Held while a runtime starts, so two starts of a cluster's runtime that
    /// overlap (kube-runtime runs one reconcile per object at a time, but a
    /// cluster deleted and created again under its name can overlap) start
    /// one controller, never two that both dial the brokers and write the
    /// image for a moment.
    starting: tokio::sync::Mutex<()>,
    /// Bumped when a cluster's view changes in a way its reconcile acts on
    /// ([`crate::view_changes`]).
    view_changes: watch::Sender<u64>,
}

impl ClusterControllers {
    pub fn new(
        config: kube::Config,
        client: Client,
        metrics: crate::metrics::Metrics,
        session_timeout_ms: u64,
        control_certs: Lifetimes,
    ) -> Self {
        Self {
            config,
            client,
            metrics,
            session_timeout_ms,
            control_certs,
            clusters: Mutex::new(HashMap::new()),
            starting: tokio::sync::Mutex::new(()),
            view_changes: watch::Sender::new(0),
        }
    }

    /// One item whenever a cluster's view changed in a way its KafkaCluster
    /// reconcile acts on (a broker came or went, moves ended, ...).
    pub fn view_changes(&self) -> impl futures::Stream<Item = ()> + Send + 'static {
        crate::view_changes::stream(self.view_changes.subscribe())
    }

    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<ClusterController>> {
        self.clusters
            .lock()
            .expect("controllers lock")
            .get(&(namespace.to_string(), name.to_string()))
            .cloned()
    }

    /// Stops and forgets the runtime of a KafkaCluster that is gone (its
    /// sessions end, its tasks stop, its per-cluster gauges are dropped).
    /// The image stays in its ConfigMap until garbage collection removes
    /// that with the cluster. Returns whether a runtime was running.
    pub fn remove(&self, namespace: &str, name: &str) -> bool {
        let rt = self
            .clusters
            .lock()
            .expect("controllers lock")
            .remove(&(namespace.to_string(), name.to_string()));
        let Some(rt) = rt else {
            return false;
        };
        rt.stop();
        let labels = [namespace, name];
        for g in [
            &self.metrics.offline,
            &self.metrics.under_replicated,
            &self.metrics.below_replication_factor,
            &self.metrics.reassigning,
            &self.metrics.brokers_alive,
        ] {
            let _ = g.remove_label_values(&labels);
        }
        for kind in skein_controller::service::ELECTION_KINDS {
            let _ = self
                .metrics
                .elections
                .remove_label_values(&[namespace, name, kind]);
        }
        info!(%namespace, cluster = %name, "controller stopped (KafkaCluster deleted)");
        true
    }

    /// The runtime of `kc`, started (image loaded from its ConfigMap, in
    /// session with its `spec.replicas` brokers) when missing.
    pub async fn ensure(
        &self,
        kc: &KafkaCluster,
    ) -> Result<Arc<ClusterController>, ControllerStartError> {
        let names = ClusterNames::of(kc);
        let tls = crate::control_tls::ensure(&self.client, kc, self.control_certs).await?;
        if let Some(rt) = self.get(&names.namespace, &names.cluster) {
            rt.set_tls(tls);
            rt.refresh_plaintext(&self.client).await?;
            crate::metadata_store::ensure_key(&self.client, kc, Some(&rt.key)).await?;
            return Ok(rt);
        }
        let _starting = self.starting.lock().await;
        if let Some(rt) = self.get(&names.namespace, &names.cluster) {
            // Started by the reconcile this one waited for.
            rt.set_tls(tls);
            rt.refresh_plaintext(&self.client).await?;
            return Ok(rt);
        }
        // The key that seals SCRAM credentials in the metadata log (made
        // when missing; used once the cluster is at skein.version 3).
        let key = crate::metadata_store::ensure_key(&self.client, kc, None).await?;
        // No metadata log yet: a new cluster, which starts at its initial
        // feature level (below).
        let head = crate::metadata_store::metadata_config_map(&names.cluster);
        let is_new = kube::Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(
            self.client.clone(),
            &names.namespace,
        )
        .get_opt(&head)
        .await
        .map_err(|e| ControllerStartError::Image(std::io::Error::other(e)))?
        .is_none();
        let initial_level = initial_feature_level(kc.spec.feature_level);
        // Before the first sessions: they must know which pods still serve
        // plaintext.
        let plaintext = crate::control_tls::plaintext_brokers(&self.client, &names).await?;
        let owner = kc.controller_owner_ref(&()).map(|mut o| {
            o.controller = Some(false);
            o
        });
        let store = crate::metadata_store::ConfigMapBlobStore::start(
            self.config.clone(),
            &names.namespace,
            &names.cluster,
            owner,
            Some(key.clone()),
        )
        .map_err(ControllerStartError::Image)?;
        // The brokers' cluster-wide settings (spec.config) the controller
        // acts on: min.insync.replicas for the eligible leader replicas,
        // unclean elections, the preferred-leader rebalance.
        let config = ControllerConfig {
            broker_session_timeout_ms: self.session_timeout_ms,
            new_cluster_features: new_cluster_features(initial_level),
            ..ControllerConfig::default()
        }
        .with_broker_settings(|k| kc.spec.config.get(k).map(String::as_str));
        // Reading the log is blocking I/O (the store's own thread answers).
        let controller = tokio::task::spawn_blocking(move || {
            let controller = ControllerService::open_store(Some(Box::new(store)), config)?;
            if is_new && initial_level > 1 {
                start_at_level(&controller, initial_level)?;
            }
            Ok(controller)
        })
        .await
        .map_err(|e| ControllerStartError::Image(std::io::Error::other(e)))?
        .map_err(|e| {
            // Sealed credentials the key cannot open: the message names the
            // Secret; the cluster is refused until it holds the right key.
            if skein_controller::store::is_seal_error(&e) {
                ControllerStartError::MetadataKey(e.to_string())
            } else {
                ControllerStartError::Image(e)
            }
        })?;
        let rt = Arc::new(ClusterController {
            controller: controller.clone(),
            names: names.clone(),
            control_port: kc.spec.listeners.control_port,
            sessions: Mutex::new(BTreeMap::new()),
            tasks: Mutex::new(Vec::new()),
            restarting: Mutex::new(None),
            tls: Arc::new(SessionTls {
                current: std::sync::RwLock::new(tls),
                plaintext: std::sync::RwLock::new(BTreeSet::new()),
                all_tls: AtomicBool::new(false),
            }),
            key,
        });
        rt.set_plaintext(plaintext);
        {
            let mut tasks = rt.tasks.lock().expect("tasks lock");
            tasks.push(controller.spawn_ticker(Duration::from_millis(250)));
            tasks.push(tokio::spawn(crate::topic_mirror::mirror_topics(
                self.client.clone(),
                names.clone(),
                controller.clone(),
                self.metrics.clone(),
            )));
            tasks.push(tokio::spawn(crate::view_changes::report(
                controller.clone(),
                self.view_changes.clone(),
            )));
        }
        rt.set_brokers(kc.spec.replicas);
        info!(namespace = %names.namespace, cluster = %names.cluster, "controller started");
        self.clusters
            .lock()
            .expect("controllers lock")
            .insert((names.namespace.clone(), names.cluster.clone()), rt.clone());
        Ok(rt)
    }
}

/// The `skein.version` a new cluster starts at: `spec.featureLevel`, or this
/// release's highest level when unset — as Kafka's `kafka-storage format`
/// starts a new cluster at the latest `metadata.version`. Nothing older has
/// written to a new cluster, so there is nothing to stay compatible with,
/// and the newest formats (SCRAM credentials sealed, level 3) hold from the
/// first record. A cluster that exists keeps its level until its spec
/// raises it.
pub fn initial_feature_level(spec: Option<i16>) -> i16 {
    use skein_controller::features::{SKEIN_VERSION_MAX, SKEIN_VERSION_MIN};
    spec.unwrap_or(SKEIN_VERSION_MAX)
        .clamp(SKEIN_VERSION_MIN, SKEIN_VERSION_MAX)
}

/// The other features a new cluster starts at, by its `skein.version`
/// ([`skein_controller::features::new_cluster_features`]).
pub fn new_cluster_features(skein_level: i16) -> std::collections::BTreeMap<String, i16> {
    skein_controller::features::new_cluster_features(skein_level)
}

/// Finalizes `level` on a new cluster's controller, before any broker
/// registered (so none can lack it).
fn start_at_level(controller: &ControllerService, level: i16) -> std::io::Result<()> {
    let feature = skein_controller::features::SKEIN_VERSION;
    controller
        .call(req::UpdateFeature {
            feature: feature.into(),
            level,
            validate_only: false,
        })
        .map_err(|e| std::io::Error::other(format!("starting at {feature} {level}: {e}")))?;
    info!(
        level,
        "new cluster: {feature} {level} finalized before any broker registered"
    );
    Ok(())
}

/// A Topic's finalizer deletes the topic through its cluster's controller.
impl crate::context::TopicRemover for ClusterControllers {
    fn delete_topic<'a>(
        &'a self,
        namespace: &'a str,
        cluster: &'a str,
        topic: &'a str,
    ) -> crate::context::BoxFuture<'a, Result<(), crate::error::TopicRemovalError>> {
        let result = match self.get(namespace, cluster) {
            Some(rt) => rt.delete_topic(topic).map_err(Into::into),
            None => Err(crate::error::TopicRemovalError::Unavailable(format!(
                "no controller runs for cluster {namespace}/{cluster} in this operator yet"
            ))),
        };
        Box::pin(async move { result })
    }
}

#[cfg(test)]
pub mod tests {
    use super::*;
    use skein_controller::Event;

    /// An operator taking over a roll reads the restart from `status.roll`:
    /// the same pod, uid, broker, epoch and image, and a clock that started
    /// at the restart; nothing from a status without the record.
    #[test]
    fn a_roll_taken_over_keeps_its_restart_and_its_clock() {
        let at: Time = Time("2026-12-08T00:00:00Z".parse().unwrap());
        let now: Time = Time("2026-12-08T00:00:30Z".parse().unwrap());
        let roll = skein_crds::RollStatus {
            progress: "1/3".into(),
            updated_replicas: 1,
            replicas: 3,
            pod: Some("pace-2".into()),
            restarted_at: Some(at.clone()),
            pod_uid: Some("uid-old".into()),
            broker_epoch: Some(41),
            image: Some("skein-broker:new".into()),
            waiting_for: "waiting".into(),
        };
        let r = Restart::from_status(&roll, &now).expect("a record");
        assert_eq!(
            (r.pod.as_str(), r.uid.as_str(), r.broker, r.broker_epoch),
            ("pace-2", "uid-old", 2, 41)
        );
        assert_eq!(
            (r.image.as_str(), &r.restarted_at),
            ("skein-broker:new", &at)
        );
        let waited = r.since.elapsed();
        assert!(
            waited >= Duration::from_secs(30) && waited < Duration::from_secs(40),
            "{waited:?}"
        );
        // A restart recorded by an operator that kept no uid, or no restart at all.
        assert!(Restart::from_status(
            &skein_crds::RollStatus {
                pod_uid: None,
                ..roll.clone()
            },
            &now
        )
        .is_none());
        assert!(
            Restart::from_status(&skein_crds::RollStatus { pod: None, ..roll }, &now).is_none()
        );
    }

    #[test]
    fn a_new_cluster_starts_at_its_spec_level_or_the_highest() {
        use skein_controller::features::SKEIN_VERSION_MAX;
        assert_eq!(initial_feature_level(None), SKEIN_VERSION_MAX);
        assert_eq!(initial_feature_level(Some(1)), 1);
        assert_eq!(initial_feature_level(Some(2)), 2);
        // A level this release lacks cannot be started at (the spec's step
        // says why); nor one below the lowest.
        assert_eq!(initial_feature_level(Some(99)), SKEIN_VERSION_MAX);
        assert_eq!(initial_feature_level(Some(0)), 1);
    }

    #[test]
    fn a_new_cluster_at_an_earlier_level_starts_at_transaction_version_0() {
        use skein_controller::features::{SKEIN_VERSION_MAX, TRANSACTION_VERSION};
        assert_eq!(
            new_cluster_features(SKEIN_VERSION_MAX).get(TRANSACTION_VERSION),
            Some(&2)
        );
        assert_eq!(new_cluster_features(3).get(TRANSACTION_VERSION), Some(&2));
        use skein_controller::features::SHARE_VERSION;
        assert_eq!(new_cluster_features(4).get(SHARE_VERSION), None);
        use skein_controller::features::STREAMS_VERSION;
        assert_eq!(new_cluster_features(4).get(STREAMS_VERSION), None);
        assert_eq!(
            new_cluster_features(SKEIN_VERSION_MAX).get(STREAMS_VERSION),
            Some(&1)
        );
        assert_eq!(
            new_cluster_features(SKEIN_VERSION_MAX).get(SHARE_VERSION),
            Some(&1)
        );
        assert!(new_cluster_features(1).is_empty());
    }

    #[test]
    fn a_new_clusters_level_is_finalized_before_any_broker_registers() {
        use skein_controller::features::{SKEIN_VERSION, SKEIN_VERSION_MAX};
        let controller = ControllerService::open(None, ControllerConfig::default()).unwrap();
        assert_eq!(controller.feature_level(SKEIN_VERSION), 1);
        start_at_level(&controller, SKEIN_VERSION_MAX).unwrap();
        assert_eq!(controller.feature_level(SKEIN_VERSION), SKEIN_VERSION_MAX);
    }

    /// A cluster's controller in memory, with brokers 0..3 registered and no
    /// sessions (its instructions go nowhere); the reconcile's step tests
    /// use it too.
    pub fn runtime() -> ClusterController {
        let controller = ControllerService::open(None, ControllerConfig::default()).unwrap();
        for broker in 0..3 {
            controller
                .handle(Event::BrokerRegistered {
                    broker,
                    host: format!("demo-{broker}"),
                    port: 9092,
                    rack: None,
                    directory_id: None,
                    previous_broker_epoch: None,
                    endpoints: vec![],
                    // This release: a new cluster is at its levels.
                    software: skein_controller::BrokerSoftware {
                        version: Some(env!("CARGO_PKG_VERSION").into()),
                        features: skein_controller::features::supported(),
                    },
                })
                .unwrap();
        }
        ClusterController {
            controller,
            names: ClusterNames {
                cluster: "demo".into(),
                namespace: "streaming".into(),
            },
            control_port: 9192,
            sessions: Mutex::new(BTreeMap::new()),
            tasks: Mutex::new(Vec::new()),
            restarting: Mutex::new(None),
            tls: Arc::new(SessionTls {
                current: std::sync::RwLock::new(crate::control_tls::test_tls(1_800_000_000)),
                plaintext: std::sync::RwLock::new(BTreeSet::new()),
                all_tls: AtomicBool::new(false),
            }),
            key: skein_controller::SealingKey::new(&[1; 32], "test").unwrap(),
        }
    }

    /// Renewed certificates serve the next session and end none; brokers
    /// whose pods still serve plaintext get plaintext until none does.
    #[tokio::test]
    async fn new_certificates_serve_the_next_sessions_and_end_none() {
        let rt = runtime();
        rt.set_brokers(3);
        let first = rt.tls.for_broker(0).unwrap();
        let renewed = crate::control_tls::test_tls(1_800_000_100);
        rt.set_tls(renewed.clone());
        assert!(Arc::ptr_eq(&rt.tls.for_broker(0).unwrap(), &renewed.config));
        assert!(!Arc::ptr_eq(&first, &renewed.config));
        let sessions = rt.sessions.lock().unwrap();
        assert_eq!(sessions.len(), 3);
        assert!(
            sessions.values().all(|tx| !*tx.borrow()),
            "a session was ended"
        );
        drop(sessions);

        rt.set_plaintext(BTreeSet::from([2]));
        assert!(rt.tls.for_broker(2).is_none());
        assert!(rt.tls.for_broker(1).is_some());
        assert!(!rt.tls.all_tls.load(Ordering::Relaxed));
        rt.set_plaintext(BTreeSet::new());
        assert!(rt.tls.for_broker(2).is_some());
        assert!(
            rt.tls.all_tls.load(Ordering::Relaxed),
            "pods are listed no more"
        );
        rt.stop();
    }

    fn spec(partitions: i32, replication_factor: i32) -> TopicSpec {
        TopicSpec {
            cluster_ref: skein_crds::ClusterRef {
                name: "demo".into(),
            },
            topic_name: None,
            partitions,
            replication_factor,
            config: BTreeMap::new(),
        }
    }

    #[test]
    fn a_running_moves_throttle_lists_survive_the_topic_reconcile_and_go_after_it() {
        use skein_controller::replication_throttle::{FOLLOWER_REPLICAS, LEADER_REPLICAS};
        let rt = runtime();
        rt.ensure_topic(&spec(1, 1), "orders").unwrap();
        let from = rt.controller.view().topics["orders"].partitions[0].replicas[0];
        let to = (0..3).find(|b| *b != from).unwrap();
        // The operator's own move: throttled, its replicas listed.
        rt.controller
            .handle(Event::ReassignPartition {
                topic: "orders".into(),
                partition: 0,
                target: Some(vec![to]),
                throttled: true,
            })
            .unwrap();
        let listed = |rt: &ClusterController| {
            let configs = rt.controller.view().topics["orders"].configs.clone();
            (
                configs.get(LEADER_REPLICAS).cloned(),
                configs.get(FOLLOWER_REPLICAS).cloned(),
            )
        };
        assert_eq!(
            listed(&rt),
            (Some(format!("0:{from}")), Some(format!("0:{to}")))
        );
        // A Topic reconcile while it moves keeps them.
        rt.ensure_topic(&spec(1, 1), "orders").unwrap();
        assert_eq!(
            listed(&rt),
            (Some(format!("0:{from}")), Some(format!("0:{to}")))
        );
        // Lists nothing moves for any more (left by a tool) follow the spec: gone.
        rt.controller
            .handle(Event::ReassignPartition {
                topic: "orders".into(),
                partition: 0,
                target: None,
                throttled: false,
            })
            .unwrap();
        rt.controller
            .handle(Event::TopicConfigChanged {
                topic: "orders".into(),
                configs: BTreeMap::from([(LEADER_REPLICAS.to_string(), "0:1".to_string())]),
            })
            .unwrap();
        rt.ensure_topic(&spec(1, 1), "orders").unwrap();
        assert_eq!(listed(&rt), (None, None));
    }

    #[test]
    fn a_changed_replication_factor_is_reassigned_and_asked_for_once() {
        let rt = runtime();
        assert_eq!(
            rt.ensure_topic(&spec(3, 1), "orders"),
            Ok(ReplicationFactorStep::InPlace)
        );
        assert_eq!(
            rt.ensure_topic(&spec(3, 3), "orders"),
            Ok(ReplicationFactorStep::Started(3))
        );
        let view = rt.controller.view();
        for p in &view.topics["orders"].partitions {
            assert_eq!(p.replicas.len(), 3, "{p:?}");
            assert_eq!(p.adding_replicas.len(), 2, "{p:?}");
            assert_eq!(p.isr, vec![p.leader], "new replicas not in sync yet");
        }
        // The change is running: asking again starts nothing.
        assert_eq!(
            rt.ensure_topic(&spec(3, 3), "orders"),
            Ok(ReplicationFactorStep::InPlace)
        );
        // Partitions added now get three replicas at once.
        assert_eq!(
            rt.ensure_topic(&spec(4, 3), "orders"),
            Ok(ReplicationFactorStep::InPlace)
        );
        let view = rt.controller.view();
        let added = &view.topics["orders"].partitions[3];
        assert_eq!((added.replicas.len(), added.isr.len()), (3, 3));
        // Back to 1 before the new replicas caught up: each partition keeps
        // its leader, the rest go.
        assert_eq!(
            rt.ensure_topic(&spec(4, 1), "orders"),
            Ok(ReplicationFactorStep::Started(4))
        );
        let view = rt.controller.view();
        for p in &view.topics["orders"].partitions {
            assert_eq!(p.replicas, vec![p.leader], "{p:?}");
            assert!(p.adding_replicas.is_empty() && p.removing_replicas.is_empty());
        }
    }

    #[test]
    fn a_replication_factor_the_controller_cannot_reach_is_reported_not_failed() {
        let rt = runtime();
        rt.ensure_topic(&spec(2, 1), "orders").unwrap();
        // Four replicas on three brokers (validation refuses this before it
        // gets here; the controller's answer is the backstop).
        let step = rt.ensure_topic(&spec(3, 4), "orders").unwrap();
        assert!(
            matches!(&step, ReplicationFactorStep::Blocked(why) if why.contains("larger than the 3 available")),
            "{step:?}"
        );
        // The rest of the spec is still applied.
        assert_eq!(rt.controller.view().topics["orders"].partitions.len(), 3);
        // A lost broker: three replicas no longer fit on the live ones.
        rt.controller
            .handle(Event::BrokerLost { broker: 2 })
            .unwrap();
        let step = rt.ensure_topic(&spec(3, 3), "orders").unwrap();
        assert!(
            matches!(step, ReplicationFactorStep::Blocked(_)),
            "{step:?}"
        );
        let view = rt.controller.view();
        assert!(view.topics["orders"]
            .partitions
            .iter()
            .all(|p| p.replicas.len() == 1));
    }
}
