//! The control plane across processes (`control.proto`): the controller
//! opens one long-lived gRPC session per broker on the broker's
//! `control.listen` address.
//!
//! * Broker side: [`RemoteController`] is the broker's [`ControlPlane`]. It
//!   serves `BrokerControl.Session`; on every new session it registers the
//!   broker, applies the metadata views and partition instructions the
//!   controller sends, in order, and carries the broker's requests
//!   (heartbeats, ISR changes, topic admin, producer-id blocks, controlled
//!   shutdown) up with an id the reply names.
//! * Controller side: [`drive_session`] dials one broker, forwards its
//!   requests to the [`ControllerService`] and sends it what the controller
//!   publishes. When the session breaks (the broker process died: its
//!   sockets close), the controller treats the broker as lost at once; a
//!   broker that hangs without closing its sockets is fenced when its
//!   heartbeats stop.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc as std_mpsc, Arc, Condvar, Mutex, RwLock};
use std::time::Duration;

use futures::StreamExt;
use kafka_protocol::error::ResponseError;
use skein_controller::{
    AlterPartitionRequest, ControllerError, DirectoryId, ElectionType, Event, NewTopic,
    PartitionState, ProducerIdBlock, Reply, TopicId, TopicPartition,
};
use tokio::sync::mpsc;
use tokio_stream::wrappers::UnboundedReceiverStream;
use uuid::Uuid;

use super::{BrokerLink, ControlPlane, ControllerService, PartitionChange, View};
use crate::error::ApiError;
use crate::metadata::{BrokerMeta, ClusterImage, PartitionMeta, TopicMeta};

/// Generated from `controller/proto/skein/control/v1/control.proto`.
#[allow(clippy::all, missing_docs)]
pub mod pb {
    tonic::include_proto!("skein.control.v1");
}

use pb::broker_control_client::BrokerControlClient;
use pb::broker_control_server::{BrokerControl, BrokerControlServer};
use pb::{controller_message, reply, request, BrokerMessage, ControllerMessage};

/// How long a broker request waits for the controller's answer.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

// ---------------------------------------------------------------------------
// Conversions

fn view_to_pb(v: &ClusterImage) -> pb::MetadataView {
    pb::MetadataView {
        cluster_id: v.cluster_id.clone(),
        controller_id: v.controller_id,
        brokers: v
            .brokers
            .values()
            .map(|b| pb::BrokerView {
                id: b.id,
                host: b.host.clone(),
                port: b.port as u32,
                rack: b.rack.clone(),
                alive: b.alive,
                storage_lost: b.storage_lost,
            })
            .collect(),
        topics: v
            .topics
            .values()
            .map(|t| pb::TopicView {
                name: t.name.clone(),
                topic_id: t.id.as_bytes().to_vec(),
                configs: t.configs.clone().into_iter().collect(),
                partitions: t
                    .partitions
                    .iter()
                    .map(|p| pb::PartitionView {
                        replicas: p.replicas.clone(),
                        isr: p.isr.clone(),
                        leader: p.leader,
                        leader_epoch: p.leader_epoch,
                        adding_replicas: p.adding_replicas.clone(),
                        removing_replicas: p.removing_replicas.clone(),
                        ..Default::default()
                    })
                    .collect(),
            })
            .collect(),
    }
}

fn view_from_pb(v: pb::MetadataView) -> ClusterImage {
    ClusterImage {
        cluster_id: v.cluster_id,
        controller_id: v.controller_id,
        brokers: v
            .brokers
            .into_iter()
            .map(|b| {
                (
                    b.id,
                    BrokerMeta {
                        id: b.id,
                        host: b.host,
                        port: b.port as u16,
                        rack: b.rack,
                        alive: b.alive,
                        storage_lost: b.storage_lost,
                    },
                )
            })
            .collect(),
        topics: v
            .topics
            .into_iter()
            .map(|t| {
                let meta = TopicMeta {
                    name: t.name.clone(),
                    id: uuid_from(&t.topic_id),
                    configs: t.configs.into_iter().collect(),
                    partitions: t
                        .partitions
                        .into_iter()
                        .map(|p| PartitionMeta {
                            replicas: p.replicas,
                            isr: p.isr,
                            leader: p.leader,
                            leader_epoch: p.leader_epoch,
                            adding_replicas: p.adding_replicas,
                            removing_replicas: p.removing_replicas,
                        })
                        .collect(),
                };
                (t.name, meta)
            })
            .collect(),
    }
}

fn uuid_from(bytes: &[u8]) -> Uuid {
    Uuid::from_slice(bytes).unwrap_or(Uuid::nil())
}

fn topic_id_from(bytes: &[u8]) -> TopicId {
    TopicId(uuid_from(bytes).as_u128())
}

fn changes_to_pb(changes: Vec<PartitionChange>) -> pb::PartitionChanges {
    use pb::partition_change::Role;
    let changes = changes
        .into_iter()
        .map(|c| match c {
            PartitionChange::Leader {
                topic,
                partition,
                leader_epoch,
                partition_epoch,
                replicas,
                isr,
            } => pb::PartitionChange {
                topic,
                partition,
                role: Some(Role::Leader(pb::BecomeLeader {
                    leader_epoch,
                    partition_epoch,
                    replicas,
                    isr,
                })),
            },
            PartitionChange::Follower {
                topic,
                partition,
                leader,
                leader_epoch,
                partition_epoch,
                replicas,
            } => pb::PartitionChange {
                topic,
                partition,
                role: Some(Role::Follower(pb::BecomeFollower {
                    leader,
                    leader_epoch,
                    partition_epoch,
                    replicas,
                })),
            },
            PartitionChange::Stop {
                topic,
                partition,
                delete,
            } => pb::PartitionChange {
                topic,
                partition,
                role: Some(Role::Stop(pb::StopReplica { delete })),
            },
        })
        .collect();
    pb::PartitionChanges { changes }
}

fn changes_from_pb(changes: pb::PartitionChanges) -> Vec<PartitionChange> {
    use pb::partition_change::Role;
    changes
        .changes
        .into_iter()
        .filter_map(|c| {
            Some(match c.role? {
                Role::Leader(l) => PartitionChange::Leader {
                    topic: c.topic,
                    partition: c.partition,
                    leader_epoch: l.leader_epoch,
                    partition_epoch: l.partition_epoch,
                    replicas: l.replicas,
                    isr: l.isr,
                },
                Role::Follower(f) => PartitionChange::Follower {
                    topic: c.topic,
                    partition: c.partition,
                    leader: f.leader,
                    leader_epoch: f.leader_epoch,
                    partition_epoch: f.partition_epoch,
                    replicas: f.replicas,
                },
                Role::Stop(s) => PartitionChange::Stop {
                    topic: c.topic,
                    partition: c.partition,
                    delete: s.delete,
                },
            })
        })
        .collect()
}

fn state_to_pb(p: &PartitionState) -> pb::PartitionView {
    pb::PartitionView {
        replicas: p.replicas.clone(),
        isr: p.isr.clone(),
        leader: p.leader,
        leader_epoch: p.leader_epoch,
        partition_epoch: p.partition_epoch,
        adding_replicas: p.adding_replicas.clone(),
        removing_replicas: p.removing_replicas.clone(),
        elr: p.elr.clone(),
    }
}

fn state_from_pb(p: pb::PartitionView) -> PartitionState {
    PartitionState {
        replicas: p.replicas,
        isr: p.isr,
        elr: p.elr,
        leader: p.leader,
        leader_epoch: p.leader_epoch,
        partition_epoch: p.partition_epoch,
        adding_replicas: p.adding_replicas,
        removing_replicas: p.removing_replicas,
    }
}

/// The request kind for a broker's event (`None`: not carried over the wire).
fn event_to_pb(event: &Event) -> Option<request::Kind> {
    Some(match event {
        Event::BrokerRegistered {
            broker,
            host,
            port,
            rack,
            directory_id,
        } => request::Kind::Register(pb::Register {
            broker_id: *broker,
            host: host.clone(),
            port: *port as u32,
            rack: rack.clone(),
            directory_id: directory_id
                .map(|d| d.0.to_be_bytes().to_vec())
                .unwrap_or_default(),
            cluster_id: None,
        }),
        Event::BrokerHeartbeat { broker_epoch, .. } => request::Kind::Heartbeat(pb::Heartbeat {
            broker_epoch: *broker_epoch,
        }),
        Event::ControlledShutdownRequested { broker_epoch, .. } => {
            request::Kind::ControlledShutdown(pb::ControlledShutdown {
                broker_epoch: *broker_epoch,
            })
        }
        Event::CreateTopic(t) => request::Kind::CreateTopic(pb::CreateTopic {
            name: t.name.clone(),
            topic_id: Uuid::from_u128(t.topic_id.0).as_bytes().to_vec(),
            partitions: t.partitions,
            replication_factor: t.replication_factor as u32,
            configs: t.configs.clone().into_iter().collect(),
            validate_only: t.validate_only,
        }),
        Event::CreatePartitions { topic, count, .. } => {
            request::Kind::CreatePartitions(pb::CreatePartitions {
                topic: topic.clone(),
                count: *count,
            })
        }
        Event::TopicConfigChanged { topic, configs } => {
            request::Kind::AlterConfigs(pb::AlterConfigs {
                topic: topic.clone(),
                configs: configs.clone().into_iter().collect(),
            })
        }
        Event::DeleteTopic { topic } => request::Kind::DeleteTopic(pb::DeleteTopic {
            name: topic.clone(),
        }),
        Event::AlterPartition(a) => request::Kind::AlterPartition(pb::AlterPartition {
            broker_epoch: a.broker_epoch,
            topic: a.topic.clone(),
            topic_id: Uuid::from_u128(a.topic_id.0).as_bytes().to_vec(),
            partition: a.partition,
            leader_epoch: a.leader_epoch,
            partition_epoch: a.partition_epoch,
            new_isr: a.new_isr.clone(),
            new_isr_broker_epochs: a
                .new_isr_broker_epochs
                .iter()
                .map(|(b, e)| (*b, *e))
                .collect(),
        }),
        Event::AllocateProducerIds { broker_epoch, .. } => {
            request::Kind::AllocateProducerIds(pb::AllocateProducerIds {
                broker_epoch: *broker_epoch,
            })
        }
        Event::ElectLeaders {
            election,
            partitions,
        } if partitions.len() == 1 => request::Kind::ElectLeader(pb::ElectLeader {
            topic: partitions[0].topic.clone(),
            partition: partitions[0].partition,
            unclean: *election == ElectionType::Unclean,
        }),
        Event::ReassignPartition {
            topic,
            partition,
            target,
        } => request::Kind::ReassignPartition(pb::ReassignPartition {
            topic: topic.clone(),
            partition: *partition,
            target: target.clone().unwrap_or_default(),
            cancel: target.is_none(),
        }),
        _ => return None,
    })
}

/// The controller's event for a request from broker `broker`.
fn event_from_pb(broker: i32, kind: request::Kind) -> Event {
    match kind {
        request::Kind::Register(r) => Event::BrokerRegistered {
            broker,
            host: r.host,
            port: r.port as u16,
            rack: r.rack,
            directory_id: <[u8; 16]>::try_from(r.directory_id.as_slice())
                .ok()
                .map(|b| DirectoryId(u128::from_be_bytes(b))),
        },
        request::Kind::Heartbeat(h) => Event::BrokerHeartbeat {
            broker,
            broker_epoch: h.broker_epoch,
        },
        request::Kind::ControlledShutdown(c) => Event::ControlledShutdownRequested {
            broker,
            broker_epoch: c.broker_epoch,
        },
        request::Kind::CreateTopic(t) => Event::CreateTopic(NewTopic {
            name: t.name,
            topic_id: topic_id_from(&t.topic_id),
            partitions: t.partitions,
            replication_factor: t.replication_factor as u16,
            configs: t.configs.into_iter().collect(),
            assignment: None,
            validate_only: t.validate_only,
        }),
        request::Kind::CreatePartitions(c) => Event::CreatePartitions {
            topic: c.topic,
            count: c.count,
            assignment: None,
        },
        request::Kind::AlterConfigs(a) => Event::TopicConfigChanged {
            topic: a.topic,
            configs: a.configs.into_iter().collect(),
        },
        request::Kind::DeleteTopic(d) => Event::DeleteTopic { topic: d.name },
        request::Kind::AlterPartition(a) => Event::AlterPartition(AlterPartitionRequest {
            broker,
            broker_epoch: a.broker_epoch,
            topic: a.topic,
            topic_id: topic_id_from(&a.topic_id),
            partition: a.partition,
            leader_epoch: a.leader_epoch,
            partition_epoch: a.partition_epoch,
            new_isr: a.new_isr,
            new_isr_broker_epochs: a.new_isr_broker_epochs.into_iter().collect(),
        }),
        request::Kind::AllocateProducerIds(a) => Event::AllocateProducerIds {
            broker,
            broker_epoch: a.broker_epoch,
        },
        request::Kind::ElectLeader(e) => Event::ElectLeaders {
            election: if e.unclean {
                ElectionType::Unclean
            } else {
                ElectionType::Preferred
            },
            partitions: vec![TopicPartition::new(e.topic, e.partition)],
        },
        request::Kind::ReassignPartition(r) => Event::ReassignPartition {
            topic: r.topic,
            partition: r.partition,
            target: (!r.cancel).then_some(r.target),
        },
    }
}

fn error_parts(e: &ControllerError) -> (i32, String) {
    (e.kafka_code() as i32, e.to_string())
}

/// The wire reply for the controller's answer to one request.
fn reply_to_pb(id: u64, reply: Option<Reply>) -> pb::Reply {
    let mut out = pb::Reply {
        id,
        ..Default::default()
    };
    let mut fail = |e: &ControllerError| {
        let (code, message) = error_parts(e);
        out.error_code = code;
        out.error_message = message;
    };
    let result = match reply {
        None => {
            out.error_code = ResponseError::UnknownServerError.code() as i32;
            out.error_message = "the controller gave no answer".into();
            None
        }
        Some(Reply::BrokerRegistered { result, .. }) => match result {
            Ok(epoch) => Some(reply::Result::BrokerEpoch(epoch)),
            Err(e) => {
                fail(&e);
                None
            }
        },
        Some(Reply::AlterPartition { result, .. }) => match result {
            Ok(state) => Some(reply::Result::Partition(state_to_pb(&state))),
            Err(e) => {
                fail(&e);
                None
            }
        },
        Some(Reply::AllocateProducerIds { result, .. }) => match result {
            Ok(block) => Some(reply::Result::ProducerIds(pb::ProducerIdBlock {
                first_producer_id: block.first_producer_id,
                size: block.size,
            })),
            Err(e) => {
                fail(&e);
                None
            }
        },
        Some(Reply::CreateTopic { result, .. }) => {
            if let Err(e) = result {
                fail(&e);
            }
            None
        }
        Some(
            Reply::Heartbeat { result, .. }
            | Reply::ControlledShutdown { result, .. }
            | Reply::CreatePartitions { result, .. }
            | Reply::AlterConfigs { result, .. }
            | Reply::DeleteTopic { result, .. }
            | Reply::ReassignPartition { result, .. },
        ) => {
            if let Err(e) = result {
                fail(&e);
            }
            None
        }
        Some(Reply::ElectLeader { result, .. }) => match result {
            Ok(leader) => Some(reply::Result::Leader(leader)),
            Err(e) => {
                fail(&e);
                None
            }
        },
    };
    out.result = result;
    out
}

/// The controller-core reply a wire reply stands for, given the event it answers.
fn reply_from_pb(event: &Event, r: pb::Reply) -> Reply {
    let err = || ControllerError::Remote {
        code: r.error_code as i16,
        message: r.error_message.clone(),
    };
    let unit = || {
        if r.error_code == 0 {
            Ok(())
        } else {
            Err(err())
        }
    };
    match event {
        Event::BrokerRegistered { broker, .. } => Reply::BrokerRegistered {
            broker: *broker,
            result: match (&r.result, r.error_code) {
                (Some(reply::Result::BrokerEpoch(e)), 0) => Ok(*e),
                _ => Err(err()),
            },
        },
        Event::BrokerHeartbeat { broker, .. } => Reply::Heartbeat {
            broker: *broker,
            result: unit(),
        },
        Event::ControlledShutdownRequested { broker, .. } => Reply::ControlledShutdown {
            broker: *broker,
            result: unit(),
        },
        Event::CreateTopic(t) => Reply::CreateTopic {
            topic: t.name.clone(),
            result: unit().map(|_| t.topic_id),
        },
        Event::CreatePartitions { topic, .. } => Reply::CreatePartitions {
            topic: topic.clone(),
            result: unit(),
        },
        Event::TopicConfigChanged { topic, .. } => Reply::AlterConfigs {
            topic: topic.clone(),
            result: unit(),
        },
        Event::DeleteTopic { topic } => Reply::DeleteTopic {
            topic: topic.clone(),
            result: unit(),
        },
        Event::AlterPartition(a) => Reply::AlterPartition {
            broker: a.broker,
            topic: a.topic.clone(),
            partition: a.partition,
            result: match (r.result.clone(), r.error_code) {
                (Some(reply::Result::Partition(p)), 0) => Ok(state_from_pb(p)),
                _ => Err(err()),
            },
        },
        Event::AllocateProducerIds { broker, .. } => Reply::AllocateProducerIds {
            broker: *broker,
            result: match (&r.result, r.error_code) {
                (Some(reply::Result::ProducerIds(b)), 0) => Ok(ProducerIdBlock {
                    first_producer_id: b.first_producer_id,
                    size: b.size,
                }),
                _ => Err(err()),
            },
        },
        Event::ReassignPartition {
            topic, partition, ..
        } => Reply::ReassignPartition {
            topic: topic.clone(),
            partition: *partition,
            result: unit(),
        },
        Event::ElectLeaders { partitions, .. } if partitions.len() == 1 => Reply::ElectLeader {
            topic: partitions[0].topic.clone(),
            partition: partitions[0].partition,
            result: match (&r.result, r.error_code) {
                (Some(reply::Result::Leader(l)), 0) => Ok(*l),
                _ => Err(err()),
            },
        },
        // Not sent by brokers (see `event_to_pb`).
        _ => Reply::Heartbeat {
            broker: -1,
            result: Err(err()),
        },
    }
}

// ---------------------------------------------------------------------------
// Broker side

/// The current session with the controller, as the broker sees it.
struct Session {
    generation: u64,
    outbound: mpsc::UnboundedSender<Result<BrokerMessage, tonic::Status>>,
    /// The epoch of this session's registration (`None` until registered,
    /// or after the controller refused a heartbeat).
    broker_epoch: Option<u64>,
    /// A registration request is in flight.
    registering: bool,
}

/// A broker's control plane when the controller runs elsewhere.
pub struct RemoteController {
    node_id: i32,
    view: RwLock<View>,
    session: Mutex<Option<Session>>,
    session_changed: Condvar,
    pending: Mutex<HashMap<u64, std_mpsc::Sender<pb::Reply>>>,
    next_id: AtomicU64,
    link: Mutex<Option<Arc<dyn BrokerLink>>>,
    /// Who this broker says it is when a session starts.
    registration: Mutex<Option<pb::Register>>,
    /// The cluster its log directory belongs to (meta.properties), sent
    /// with every registration so another cluster's controller refuses it.
    cluster_id: Mutex<Option<String>>,
}

/// Blocks on `f` without starving the async runtime this thread may belong to.
fn blocking<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}

fn not_controller(why: &str) -> ApiError {
    ApiError::new(ResponseError::NotController, why.to_string())
}

impl RemoteController {
    pub fn new(node_id: i32) -> Arc<Self> {
        Arc::new(Self {
            node_id,
            view: RwLock::new(Arc::new(ClusterImage {
                controller_id: -1,
                ..Default::default()
            })),
            session: Mutex::new(None),
            session_changed: Condvar::new(),
            pending: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            link: Mutex::new(None),
            registration: Mutex::new(None),
            cluster_id: Mutex::new(None),
        })
    }

    /// The cluster id this broker's log directory belongs to; registrations
    /// carry it from now on.
    pub fn set_cluster_id(&self, cluster_id: Option<String>) {
        *self.cluster_id.lock().expect("cluster id lock") = cluster_id;
    }

    /// Serves `BrokerControl` on `addr` until the returned task is aborted.
    pub async fn serve(
        self: &Arc<Self>,
        addr: SocketAddr,
    ) -> anyhow::Result<tokio::task::JoinHandle<()>> {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| anyhow::anyhow!("cannot listen for the controller on {addr}: {e}"))?;
        let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
        let svc = BrokerControlServer::new(ControlService(self.clone()));
        Ok(tokio::spawn(async move {
            if let Err(e) = tonic::transport::Server::builder()
                .http2_keepalive_interval(Some(Duration::from_secs(5)))
                .http2_keepalive_timeout(Some(Duration::from_secs(10)))
                .serve_with_incoming(svc, incoming)
                .await
            {
                tracing::error!(error = %e, "control endpoint failed");
            }
        }))
    }

    /// Sends `kind` on the current session and waits for its reply.
    fn call(&self, kind: request::Kind, wait_for_session: Duration) -> Result<pb::Reply, ApiError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = std_mpsc::channel();
        self.pending.lock().expect("pending lock").insert(id, tx);
        let sent = {
            let guard = self.session.lock().expect("session lock");
            let (guard, _) = self
                .session_changed
                .wait_timeout_while(guard, wait_for_session, |s| s.is_none())
                .expect("session lock");
            match guard.as_ref() {
                Some(s) => s
                    .outbound
                    .send(Ok(BrokerMessage {
                        kind: Some(pb::broker_message::Kind::Request(pb::Request {
                            id,
                            kind: Some(kind),
                        })),
                    }))
                    .is_ok(),
                None => false,
            }
        };
        let result = if sent {
            rx.recv_timeout(REQUEST_TIMEOUT).map_err(|_| {
                ApiError::new(
                    ResponseError::RequestTimedOut,
                    "the controller did not answer in time",
                )
            })
        } else {
            Err(not_controller("no session with the controller"))
        };
        self.pending.lock().expect("pending lock").remove(&id);
        result
    }

    /// Waits (indefinitely) for a controller session and registers on it,
    /// unless this session is registered already. One registration at a
    /// time per session.
    fn ensure_registered(&self) -> Result<u64, ApiError> {
        let Some(reg) = self.registration.lock().expect("registration lock").clone() else {
            return Err(not_controller("the broker has not started registering"));
        };
        loop {
            let generation = {
                let guard = self.session.lock().expect("session lock");
                let mut guard = self
                    .session_changed
                    .wait_while(guard, |s| s.as_ref().is_none_or(|s| s.registering))
                    .expect("session lock");
                let s = guard.as_mut().expect("a session");
                if let Some(epoch) = s.broker_epoch {
                    return Ok(epoch);
                }
                s.registering = true;
                s.generation
            };
            let result = self.call(request::Kind::Register(reg.clone()), Duration::ZERO);
            {
                let mut guard = self.session.lock().expect("session lock");
                if let Some(s) = guard.as_mut().filter(|s| s.generation == generation) {
                    s.registering = false;
                    if let Ok(r) = &result {
                        if let (0, Some(reply::Result::BrokerEpoch(epoch))) =
                            (r.error_code, &r.result)
                        {
                            s.broker_epoch = Some(*epoch);
                        }
                    }
                }
                self.session_changed.notify_all();
            }
            match result {
                Ok(r) if r.error_code == 0 => {
                    if let Some(reply::Result::BrokerEpoch(epoch)) = r.result {
                        tracing::info!(broker_epoch = epoch, "registered with the controller");
                        return Ok(epoch);
                    }
                }
                Ok(r) => {
                    return Err(ApiError::new(
                        ResponseError::try_from_code(r.error_code as i16)
                            .unwrap_or(ResponseError::UnknownServerError),
                        r.error_message,
                    ))
                }
                Err(e) => tracing::info!(error = %e, "waiting for the controller"),
            }
        }
    }

    /// A new session replaces the old one (whose outbound stream ends).
    fn open_session(
        &self,
        outbound: mpsc::UnboundedSender<Result<BrokerMessage, tonic::Status>>,
    ) -> u64 {
        static GENERATION: AtomicU64 = AtomicU64::new(1);
        let generation = GENERATION.fetch_add(1, Ordering::Relaxed);
        *self.session.lock().expect("session lock") = Some(Session {
            generation,
            outbound,
            broker_epoch: None,
            registering: false,
        });
        self.session_changed.notify_all();
        generation
    }

    fn close_session(&self, generation: u64) {
        let mut s = self.session.lock().expect("session lock");
        if s.as_ref().map(|s| s.generation) == Some(generation) {
            *s = None;
        }
        self.session_changed.notify_all();
    }

    fn set_view(&self, view: ClusterImage) {
        let old = std::mem::replace(&mut *self.view.write().expect("view lock"), Arc::new(view));
        let new = self.view.read().expect("view lock").clone();
        let changed: Vec<String> = new
            .topics
            .iter()
            .filter(|(name, t)| {
                old.topics
                    .get(*name)
                    .is_some_and(|o| o.configs != t.configs)
            })
            .map(|(name, _)| name.clone())
            .collect();
        if !changed.is_empty() {
            let link = self.link.lock().expect("link lock").clone();
            if let Some(link) = link {
                link.topic_configs_changed(changed);
            }
        }
    }

    fn deliver(&self, changes: Vec<PartitionChange>) {
        let link = self.link.lock().expect("link lock").clone();
        if let Some(link) = link {
            link.deliver(changes);
        }
    }

    fn complete(&self, r: pb::Reply) {
        if let Some(tx) = self.pending.lock().expect("pending lock").remove(&r.id) {
            let _ = tx.send(r);
        }
    }
}

impl ControlPlane for RemoteController {
    fn view(&self) -> View {
        self.view.read().expect("view lock").clone()
    }

    fn handle(&self, event: Event) -> Result<Vec<Reply>, ApiError> {
        match &event {
            Event::BrokerRegistered { .. } => {
                let Some(request::Kind::Register(mut reg)) = event_to_pb(&event) else {
                    unreachable!("register event")
                };
                reg.cluster_id = self.cluster_id.lock().expect("cluster id lock").clone();
                *self.registration.lock().expect("registration lock") = Some(reg);
                let epoch = blocking(|| self.ensure_registered())?;
                return Ok(vec![Reply::BrokerRegistered {
                    broker: self.node_id,
                    result: Ok(epoch),
                }]);
            }
            // The session's end tells the controller.
            Event::BrokerLost { .. } => return Ok(Vec::new()),
            _ => {}
        }
        let Some(kind) = event_to_pb(&event) else {
            return Err(ApiError::new(
                ResponseError::InvalidRequest,
                "this request is not carried to the controller",
            ));
        };
        let r = blocking(|| self.call(kind, Duration::from_secs(5)))?;
        let reply = reply_from_pb(&event, r);
        if let Reply::Heartbeat {
            result: Err(ControllerError::Remote { code, .. }),
            ..
        } = &reply
        {
            // Fenced or unknown: the next `register` makes a new registration.
            if *code == ResponseError::StaleBrokerEpoch.code()
                || *code == ResponseError::BrokerIdNotRegistered.code()
            {
                if let Some(s) = self.session.lock().expect("session lock").as_mut() {
                    s.broker_epoch = None;
                }
            }
        }
        Ok(vec![reply])
    }

    fn attach(&self, _broker: i32, link: Arc<dyn BrokerLink>) {
        *self.link.lock().expect("link lock") = Some(link);
    }

    fn detach(&self, _broker: i32) {
        *self.link.lock().expect("link lock") = None;
    }

    fn broker_epoch(&self) -> Option<u64> {
        Some(
            self.session
                .lock()
                .expect("session lock")
                .as_ref()
                .and_then(|s| s.broker_epoch)
                .unwrap_or(0),
        )
    }
}

struct ControlService(Arc<RemoteController>);

#[tonic::async_trait]
impl BrokerControl for ControlService {
    type SessionStream = UnboundedReceiverStream<Result<BrokerMessage, tonic::Status>>;

    async fn session(
        &self,
        request: tonic::Request<tonic::Streaming<ControllerMessage>>,
    ) -> Result<tonic::Response<Self::SessionStream>, tonic::Status> {
        let me = self.0.clone();
        let mut inbound = request.into_inner();
        let (tx, rx) = mpsc::unbounded_channel();
        let generation = me.open_session(tx);
        tracing::info!(generation, "controller session opened");
        tokio::spawn(async move {
            // A broker that registered before does so again on every new
            // session (the first registration comes from its start-up).
            let registered = me.registration.lock().expect("registration lock").is_some();
            if registered {
                let m = me.clone();
                tokio::task::spawn_blocking(move || {
                    if let Err(e) = m.ensure_registered() {
                        tracing::warn!(error = %e, "the controller refused registration");
                    }
                });
            }
            loop {
                let msg = match inbound.message().await {
                    Ok(Some(m)) => m,
                    Ok(None) => break,
                    Err(e) => {
                        tracing::warn!(error = %e, "controller session failed");
                        break;
                    }
                };
                match msg.kind {
                    Some(controller_message::Kind::Metadata(v)) => me.set_view(view_from_pb(v)),
                    Some(controller_message::Kind::Changes(c)) => {
                        // In order, and off the async threads (opening a log
                        // may recover it).
                        let m = me.clone();
                        let changes = changes_from_pb(c);
                        let _ = tokio::task::spawn_blocking(move || m.deliver(changes)).await;
                    }
                    Some(controller_message::Kind::Reply(r)) => me.complete(r),
                    None => {}
                }
            }
            me.close_session(generation);
            tracing::info!(generation, "controller session closed");
        });
        Ok(tonic::Response::new(UnboundedReceiverStream::new(rx)))
    }
}

// ---------------------------------------------------------------------------
// Controller side

/// The controller's way into a broker over its session.
struct SessionLink {
    controller: std::sync::Weak<ControllerService>,
    outbound: mpsc::UnboundedSender<ControllerMessage>,
}

impl SessionLink {
    fn send_view(&self) {
        if let Some(c) = self.controller.upgrade() {
            let _ = self.outbound.send(ControllerMessage {
                kind: Some(controller_message::Kind::Metadata(view_to_pb(&c.view()))),
            });
        }
    }
}

impl BrokerLink for SessionLink {
    fn deliver(&self, changes: Vec<PartitionChange>) {
        // The view the instructions refer to goes first.
        self.send_view();
        let _ = self.outbound.send(ControllerMessage {
            kind: Some(controller_message::Kind::Changes(changes_to_pb(changes))),
        });
    }
}

/// What became of one session.
#[derive(Debug)]
pub enum SessionEnd {
    /// The broker could not be reached.
    Unreachable(String),
    /// The session ran and ended (the broker went away).
    Ended { broker: Option<i32> },
}

/// Opens one session with the broker at `endpoint` (`http://host:port`)
/// and runs it until it breaks or `stop` turns true.
pub async fn drive_session(
    controller: Arc<ControllerService>,
    endpoint: String,
    expect: Option<i32>,
    mut stop: tokio::sync::watch::Receiver<bool>,
    sessions: Option<prometheus::IntGaugeVec>,
) -> SessionEnd {
    let channel = match tonic::transport::Endpoint::from_shared(endpoint.clone()) {
        Ok(e) => e
            .connect_timeout(Duration::from_secs(2))
            .http2_keep_alive_interval(Duration::from_secs(5))
            .keep_alive_timeout(Duration::from_secs(10))
            .keep_alive_while_idle(true),
        Err(e) => return SessionEnd::Unreachable(e.to_string()),
    };
    let channel = match channel.connect().await {
        Ok(c) => c,
        Err(e) => return SessionEnd::Unreachable(e.to_string()),
    };
    let mut client = BrokerControlClient::new(channel);
    let (tx, rx) = mpsc::unbounded_channel::<ControllerMessage>();
    let mut inbound = match client.session(UnboundedReceiverStream::new(rx)).await {
        Ok(r) => r.into_inner(),
        Err(e) => return SessionEnd::Unreachable(e.to_string()),
    };
    let mut broker: Option<i32> = None;
    let mut published = controller.subscribe();
    let link = Arc::new(SessionLink {
        controller: Arc::downgrade(&controller),
        outbound: tx.clone(),
    });
    loop {
        tokio::select! {
            _ = stop.changed() => {
                if *stop.borrow() { break; }
            }
            changed = published.changed(), if broker.is_some() => {
                if changed.is_err() { break; }
                link.send_view();
            }
            msg = inbound.next() => {
                let req = match msg {
                    Some(Ok(BrokerMessage { kind: Some(pb::broker_message::Kind::Request(r)) })) => r,
                    Some(Ok(_)) => continue,
                    Some(Err(e)) => {
                        tracing::info!(endpoint, ?broker, error = %e, "broker session failed");
                        break;
                    }
                    None => break,
                };
                let Some(kind) = req.kind else { continue };
                if let request::Kind::Register(r) = &kind {
                    if expect.is_some_and(|want| want != r.broker_id) {
                        // Another broker than the one this address belongs
                        // to (a process that outlived its pod, an address
                        // handed out again): it must not register here.
                        tracing::warn!(endpoint, expected = ?expect, answered = r.broker_id, "a different broker answered at this address; session refused");
                        let _ = tx.send(ControllerMessage {
                            kind: Some(controller_message::Kind::Reply(pb::Reply {
                                id: req.id,
                                error_code: ResponseError::InconsistentClusterId.code() as i32,
                                error_message: format!("this address belongs to broker {}", expect.unwrap_or(-1)),
                                result: None,
                            })),
                        });
                        return SessionEnd::Unreachable(format!("broker {} answered", r.broker_id));
                    }
                    let ours = controller.view().cluster_id.clone();
                    if let Some(theirs) = r.cluster_id.as_ref().filter(|c| **c != ours) {
                        // Its disk belongs to another cluster: joining would
                        // mix two clusters' logs.
                        tracing::error!(endpoint, broker = r.broker_id, cluster_id = %theirs, ours = %ours, "a broker of another cluster tried to register; refused");
                        let _ = tx.send(ControllerMessage {
                            kind: Some(controller_message::Kind::Reply(pb::Reply {
                                id: req.id,
                                error_code: ResponseError::InconsistentClusterId.code() as i32,
                                error_message: format!("the broker's log directory belongs to cluster {theirs}, this is cluster {ours}"),
                                result: None,
                            })),
                        });
                        return SessionEnd::Unreachable(format!("broker {} belongs to cluster {theirs}", r.broker_id));
                    }
                    if broker.is_some_and(|b| b != r.broker_id) {
                        tracing::warn!(endpoint, "a broker changed its id within a session");
                        break;
                    }
                    if broker.is_none() {
                        tracing::info!(endpoint, broker = r.broker_id, "broker session opened");
                        if let Some(g) = &sessions {
                            g.with_label_values(&[&r.broker_id.to_string()]).set(1);
                        }
                    }
                    broker = Some(r.broker_id);
                    controller.attach(r.broker_id, link.clone());
                    link.send_view();
                }
                let Some(id) = broker else {
                    // A request left over from the broker's previous session.
                    let _ = tx.send(ControllerMessage {
                        kind: Some(controller_message::Kind::Reply(pb::Reply {
                            id: req.id,
                            error_code: ResponseError::BrokerIdNotRegistered.code() as i32,
                            error_message: "register first".into(),
                            result: None,
                        })),
                    });
                    continue;
                };
                let event = event_from_pb(id, kind);
                let c = controller.clone();
                let out = tx.clone();
                // Requests are answered in parallel (a controlled shutdown
                // may wait on leadership moves); instructions are still
                // delivered in the controller's order by the link.
                tokio::task::spawn_blocking(move || {
                    let reply = match c.handle(event) {
                        Ok(replies) => reply_to_pb(req.id, replies.into_iter().next()),
                        Err(e) => pb::Reply {
                            id: req.id,
                            error_code: e.code.code() as i32,
                            error_message: e.message.clone(),
                            result: None,
                        },
                    };
                    let _ = out.send(ControllerMessage {
                        kind: Some(controller_message::Kind::Reply(reply)),
                    });
                });
            }
        }
    }
    if let Some(id) = broker {
        controller.detach(id);
        if let Some(g) = &sessions {
            g.with_label_values(&[&id.to_string()]).set(0);
        }
        let c = controller.clone();
        let _ =
            tokio::task::spawn_blocking(move || c.handle(Event::BrokerLost { broker: id })).await;
        tracing::info!(
            endpoint,
            broker = id,
            "broker session ended; broker treated as lost"
        );
    }
    SessionEnd::Ended { broker }
}

/// Keeps a session with the broker at `endpoint` open until `stop`:
/// reconnects whenever it breaks.
pub async fn maintain_session(
    controller: Arc<ControllerService>,
    endpoint: String,
    expect: Option<i32>,
    stop: tokio::sync::watch::Receiver<bool>,
    sessions: Option<prometheus::IntGaugeVec>,
) {
    let mut quiet = false;
    while !*stop.borrow() {
        match drive_session(
            controller.clone(),
            endpoint.clone(),
            expect,
            stop.clone(),
            sessions.clone(),
        )
        .await
        {
            SessionEnd::Unreachable(e) => {
                if !quiet {
                    tracing::debug!(endpoint, error = e, "broker not reachable yet");
                    quiet = true;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            SessionEnd::Ended { .. } => {
                quiet = false;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}
