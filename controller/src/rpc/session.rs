//! The controller's end of the control plane (`control.proto`): it opens
//! one long-lived gRPC session per broker on the broker's `control.listen`
//! address ([`maintain_session`]), forwards the broker's requests to the
//! [`ControllerService`] and sends it what the controller publishes. When
//! the session breaks (the broker process died: its sockets close), the
//! controller treats the broker as lost at once; a broker that hangs
//! without closing its sockets is fenced when its heartbeats stop.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use tokio::sync::mpsc;
use tokio_stream::wrappers::UnboundedReceiverStream;

use super::pb::{self, broker_control_client::BrokerControlClient, controller_message, request};
use super::pb::{BrokerMessage, ControllerMessage};
use super::wire::{changes_to_pb, reply_to_pb, request_from_pb, view_delta_to_pb, view_to_pb};
use crate::plane::{BrokerLink, PartitionChange};
use crate::{ControllerService, Event, Reply};

/// Kafka's INCONSISTENT_CLUSTER_ID.
const INCONSISTENT_CLUSTER_ID: i32 = 104;
/// Kafka's UNSUPPORTED_VERSION.
const UNSUPPORTED_VERSION: i32 = 35;

/// The answer to a request of a kind this controller does not know (one a
/// newer broker sends).
pub(crate) fn unsupported_request(id: u64) -> ControllerMessage {
    ControllerMessage {
        kind: Some(controller_message::Kind::Reply(pb::Reply {
            id,
            error_code: UNSUPPORTED_VERSION,
            error_message:
                "this controller does not know this request kind (it runs an older Skein release)"
                    .into(),
            result: None,
        })),
    }
}
/// Kafka's BROKER_ID_NOT_REGISTERED.
const BROKER_ID_NOT_REGISTERED: i32 = 102;

/// The controller's way into a broker over its session.
struct SessionLink {
    controller: std::sync::Weak<ControllerService>,
    outbound: mpsc::UnboundedSender<ControllerMessage>,
    /// The version of the last view sent (0: none yet): the next one goes
    /// as a delta from it when the controller still knows what changed.
    sent: std::sync::Mutex<u64>,
}

impl SessionLink {
    /// Sends the latest view unless the broker has it: the topics changed
    /// since the last one sent, or the whole view.
    fn send_view(&self) {
        let Some(c) = self.controller.upgrade() else {
            return;
        };
        let mut sent = self.sent.lock().expect("sent lock");
        let view = c.view();
        if *sent == view.version {
            return;
        }
        let message = match c.topics_changed_between(*sent, view.version) {
            Some(changed) if *sent != 0 => view_delta_to_pb(&view, *sent, &changed),
            _ => view_to_pb(&view),
        };
        *sent = view.version;
        let _ = self.outbound.send(ControllerMessage {
            kind: Some(controller_message::Kind::Metadata(message)),
        });
    }

    /// Sends the whole latest view (a broker that registers starts from it).
    fn send_full_view(&self) {
        *self.sent.lock().expect("sent lock") = 0;
        self.send_view();
    }
}

impl BrokerLink for SessionLink {
    fn deliver(&self, changes: Vec<PartitionChange>) {
        // The view the instructions refer to goes first.
        self.send_view();
        let mut changes = changes.into_iter().peekable();
        while changes.peek().is_some() {
            let chunk: Vec<PartitionChange> = changes
                .by_ref()
                .take(super::MAX_CHANGES_PER_MESSAGE)
                .collect();
            let _ = self.outbound.send(ControllerMessage {
                kind: Some(controller_message::Kind::Changes(changes_to_pb(chunk))),
            });
        }
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

/// Opens one session with the broker at `endpoint` (`http://host:port`),
/// over TLS with `tls` ([`super::tls::client_config`]), and runs it until
/// it breaks or `stop` turns true.
pub async fn drive_session(
    controller: Arc<ControllerService>,
    endpoint: String,
    expect: Option<i32>,
    mut stop: tokio::sync::watch::Receiver<bool>,
    sessions: Option<prometheus::IntGaugeVec>,
    tls: Option<Arc<rustls::ClientConfig>>,
) -> SessionEnd {
    let channel = match tonic::transport::Endpoint::from_shared(endpoint.clone()) {
        Ok(e) => e
            .connect_timeout(Duration::from_secs(2))
            .http2_keep_alive_interval(Duration::from_secs(5))
            .keep_alive_timeout(super::KEEPALIVE_TIMEOUT)
            .keep_alive_while_idle(true)
            .initial_stream_window_size(super::STREAM_WINDOW_BYTES)
            .initial_connection_window_size(super::CONNECTION_WINDOW_BYTES),
        Err(e) => return SessionEnd::Unreachable(e.to_string()),
    };
    let channel = match super::tls::connect(channel, tls).await {
        Ok(c) => c,
        Err(e) => return SessionEnd::Unreachable(e),
    };
    let mut client = BrokerControlClient::new(channel)
        .max_decoding_message_size(super::MAX_MESSAGE_BYTES)
        .max_encoding_message_size(super::MAX_MESSAGE_BYTES);
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
        sent: std::sync::Mutex::new(0),
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
                let Some(kind) = req.kind else {
                    // A request kind of a newer release (prost decodes an
                    // unknown oneof member as none): answered, so the broker
                    // does not wait out its request timeout.
                    tracing::warn!(endpoint, ?broker, id = req.id, "a request of a kind this controller does not know; answered UNSUPPORTED_VERSION");
                    let _ = tx.send(unsupported_request(req.id));
                    continue;
                };
                if let request::Kind::Register(r) = &kind {
                    if expect.is_some_and(|want| want != r.broker_id) {
                        // Another broker than the one this address belongs
                        // to (a process that outlived its pod, an address
                        // handed out again): it must not register here.
                        tracing::warn!(endpoint, expected = ?expect, answered = r.broker_id, "a different broker answered at this address; session refused");
                        let _ = tx.send(ControllerMessage {
                            kind: Some(controller_message::Kind::Reply(pb::Reply {
                                id: req.id,
                                error_code: INCONSISTENT_CLUSTER_ID,
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
                                error_code: INCONSISTENT_CLUSTER_ID,
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
                    link.send_full_view();
                }
                let Some(id) = broker else {
                    // A request left over from the broker's previous session.
                    let _ = tx.send(ControllerMessage {
                        kind: Some(controller_message::Kind::Reply(pb::Reply {
                            id: req.id,
                            error_code: BROKER_ID_NOT_REGISTERED,
                            error_message: "register first".into(),
                            result: None,
                        })),
                    });
                    continue;
                };
                // A broker of the previous version elects one partition per
                // request and reads one leader back.
                let single = matches!(kind, request::Kind::ElectLeader(_));
                let Some(event) = request_from_pb(id, kind) else {
                    tracing::warn!(endpoint, ?broker, id = req.id, "a request kind this controller reads nowhere; answered UNSUPPORTED_VERSION");
                    let _ = tx.send(unsupported_request(req.id));
                    continue;
                };
                let c = controller.clone();
                let out = tx.clone();
                // Requests are answered in parallel (a controlled shutdown
                // may wait on leadership moves); instructions are still
                // delivered in the controller's order by the link.
                tokio::task::spawn_blocking(move || {
                    let reply = match c.handle(event) {
                        Ok(replies) => {
                            let reply = match replies.into_iter().next() {
                                Some(Reply::ElectLeaders(one)) if single => one.into_iter().next(),
                                other => other,
                            };
                            reply_to_pb(req.id, reply)
                        }
                        Err(e) => pb::Reply {
                            id: req.id,
                            error_code: e.kafka_code() as i32,
                            error_message: e.to_string(),
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
/// reconnects whenever it breaks, each time with the TLS settings `tls`
/// gives then.
pub async fn maintain_session(
    controller: Arc<ControllerService>,
    endpoint: String,
    expect: Option<i32>,
    stop: tokio::sync::watch::Receiver<bool>,
    sessions: Option<prometheus::IntGaugeVec>,
    tls: super::tls::ClientTls,
) {
    let mut quiet = false;
    while !*stop.borrow() {
        match drive_session(
            controller.clone(),
            endpoint.clone(),
            expect,
            stop.clone(),
            sessions.clone(),
            tls(),
        )
        .await
        {
            SessionEnd::Unreachable(e) => {
                if !quiet {
                    tracing::info!(endpoint, error = e, "broker not reachable yet");
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A broker's roles in many partitions go as several `Changes`
    /// messages of at most `MAX_CHANGES_PER_MESSAGE`, in their order.
    #[test]
    fn many_instructions_go_in_chunks_in_order() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let link = SessionLink {
            controller: std::sync::Weak::new(),
            outbound: tx,
            sent: std::sync::Mutex::new(0),
        };
        let n = 2 * super::super::MAX_CHANGES_PER_MESSAGE + 1;
        let changes: Vec<PartitionChange> = (0..n)
            .map(|i| PartitionChange::Stop {
                topic: "t".into(),
                partition: i as i32,
                delete: false,
            })
            .collect();
        link.deliver(changes);
        let mut sizes = Vec::new();
        let mut partitions = Vec::new();
        while let Ok(m) = rx.try_recv() {
            let Some(controller_message::Kind::Changes(c)) = m.kind else {
                panic!("only instructions were sent");
            };
            let chunk = crate::rpc::wire::changes_from_pb(c);
            sizes.push(chunk.len());
            partitions.extend(chunk.into_iter().map(|c| match c {
                PartitionChange::Stop { partition, .. } => partition,
                other => panic!("{other:?}"),
            }));
        }
        let max = super::super::MAX_CHANGES_PER_MESSAGE;
        assert_eq!(sizes, vec![max, max, 1]);
        assert_eq!(partitions, (0..n as i32).collect::<Vec<_>>());
    }

    /// What one broker loss costs the controller at scale, step by step:
    /// the event (elections, the metadata log, the view) and the messages
    /// to the surviving brokers. A measurement, not a check; run it with
    /// `cargo test --release -p skein-controller --lib -- --ignored
    /// --nocapture failover_cost` (`SKEIN_PROBE_PARTITIONS`, default
    /// 100,000).
    #[test]
    #[ignore = "a measurement, run by hand"]
    fn failover_cost() {
        use prost::Message;
        use std::time::Instant;
        let partitions: u32 = std::env::var("SKEIN_PROBE_PARTITIONS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(100_000);
        let dir = tempfile::tempdir().unwrap();
        let c =
            ControllerService::open(Some(&dir.path().join("meta")), Default::default()).unwrap();
        for b in 1..=3 {
            c.handle(Event::BrokerRegistered {
                broker: b,
                host: "127.0.0.1".into(),
                port: 9000 + b as u16,
                rack: None,
                directory_id: Some(crate::DirectoryId(b as u128)),
                previous_broker_epoch: None,
                endpoints: vec![],
                software: Default::default(),
            })
            .unwrap();
        }
        let started = Instant::now();
        for t in 0..partitions / 200 {
            c.handle(Event::CreateTopic(crate::NewTopic::new(
                format!("ms-{t:05}"),
                crate::TopicId(t as u128 + 1),
                200,
                3,
            )))
            .unwrap();
        }
        eprintln!("created {partitions} partitions in {:?}", started.elapsed());
        let mut rxs = Vec::new();
        for b in 2..=3 {
            let (tx, rx) = mpsc::unbounded_channel();
            let link = Arc::new(SessionLink {
                controller: Arc::downgrade(&c),
                outbound: tx,
                sent: std::sync::Mutex::new(0),
            });
            link.send_full_view();
            c.attach(b, link.clone());
            rxs.push((b, rx, link));
        }
        for (_, rx, _) in &mut rxs {
            while rx.try_recv().is_ok() {}
        }
        let started = Instant::now();
        c.handle(Event::BrokerLost { broker: 1 }).unwrap();
        let handled = started.elapsed();
        for (b, rx, link) in &mut rxs {
            link.send_view();
            let (mut messages, mut bytes) = (0, 0);
            while let Ok(m) = rx.try_recv() {
                messages += 1;
                bytes += m.encoded_len();
            }
            eprintln!("broker {b}: {messages} messages, {bytes} bytes");
        }
        eprintln!(
            "BrokerLost handled in {handled:?}; with the messages encoded {:?}",
            started.elapsed()
        );
    }
}
