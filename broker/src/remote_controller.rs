//! The broker's end of the control plane (`control.proto`): the controller
//! opens one long-lived gRPC session per broker on the broker's
//! `control.listen` address. [`RemoteController`] is the broker's
//! [`ControlPlane`] then. It serves `BrokerControl.Session`; on every new
//! session it registers the broker, applies the cluster views and
//! partition instructions the controller sends, in order, and carries the
//! broker's requests (heartbeats, ISR changes, topic admin, producer-id
//! blocks, controlled shutdown) up with an id the reply names. The
//! controller's end is `skein_controller::rpc::session`.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc as std_mpsc, Arc, Condvar, Mutex, RwLock};
use std::time::Duration;

use skein_controller::rpc::pb::broker_control_server::{BrokerControl, BrokerControlServer};
use skein_controller::rpc::pb::{
    self, controller_message, reply, request, BrokerMessage, ControllerMessage,
};
use skein_controller::rpc::wire::{apply_view_pb, changes_from_pb, event_to_pb, reply_from_pb};
use skein_controller::{
    BrokerLink, ClusterView, ControlPlane, ControlPlaneError, ControllerError, Event,
    PartitionChange, Reply,
};
use tokio::sync::mpsc;
use tokio_stream::wrappers::UnboundedReceiverStream;

/// How long a broker request waits for the controller's answer.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a heartbeat waits for its answer (the controller answers at
/// once; a heartbeat lost with a dead session must not hold back the next).
const HEARTBEAT_TIMEOUT: Duration = Duration::from_secs(3);

/// Kafka's STALE_BROKER_EPOCH and BROKER_ID_NOT_REGISTERED: the heartbeat
/// answers after which the broker registers again.
const STALE_BROKER_EPOCH: i16 = 77;
const BROKER_ID_NOT_REGISTERED: i16 = 102;

/// What the session hands the in-order applier: the controller's partition
/// instructions, the replies that must not overtake them, and barriers.
enum Inbound {
    Changes(Vec<PartitionChange>),
    Reply(pb::Reply),
    Barrier(std_mpsc::Sender<()>),
}

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
    view: RwLock<Arc<ClusterView>>,
    session: Mutex<Option<Session>>,
    session_changed: Condvar,
    /// Requests waiting for their reply, with the session they went out on:
    /// when that session ends, they fail at once (its controller will never
    /// answer) instead of waiting out [`REQUEST_TIMEOUT`].
    pending: Mutex<HashMap<u64, Pending>>,
    next_id: AtomicU64,
    link: Mutex<Option<Arc<dyn BrokerLink>>>,
    /// Who this broker says it is when a session starts.
    registration: Mutex<Option<pb::Register>>,
    /// The cluster its log directory belongs to (meta.properties), sent
    /// with every registration so another cluster's controller refuses it.
    cluster_id: Mutex<Option<String>>,
    /// Applies instructions in the order they came, one task for every
    /// session (an old session's last instructions go before a new one's);
    /// started with the first session.
    applier: Mutex<Option<mpsc::UnboundedSender<Inbound>>>,
    /// Set when the broker stops (`detach`): no new session is taken, so a
    /// controller that dials the stopping process (its address still
    /// resolves while it shuts down) cannot have it register again, with a
    /// new broker epoch, as if it were the broker that replaces it.
    leaving: std::sync::atomic::AtomicBool,
}

/// A request waiting for its reply.
struct Pending {
    /// The session it went out on.
    generation: u64,
    reply: std_mpsc::Sender<pb::Reply>,
    /// Its reply need not wait for the instructions that came before it:
    /// a registration (the epoch must be known before the broker's fetches
    /// can put it back in ISRs, and its heartbeats must start before the
    /// controller's session timeout fences it, however long its thousands
    /// of role instructions take to apply) and a heartbeat.
    eager: bool,
}

fn spawn_server(
    serve: impl std::future::Future<Output = Result<(), tonic::transport::Error>> + Send + 'static,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        if let Err(e) = serve.await {
            tracing::error!(error = %e, "control endpoint failed");
        }
    })
}

fn not_controller(why: &str) -> ControlPlaneError {
    ControlPlaneError::NoController(why.to_string())
}

impl RemoteController {
    pub fn new(node_id: i32) -> Arc<Self> {
        Arc::new(Self {
            node_id,
            view: RwLock::new(Arc::new(ClusterView {
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
            applier: Mutex::new(None),
            leaving: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// Queues `item` behind everything the controller sent before it.
    fn apply_in_order(self: &Arc<Self>, item: Inbound) {
        let mut applier = self.applier.lock().expect("applier lock");
        let tx = applier.get_or_insert_with(|| {
            let (tx, mut rx) = mpsc::unbounded_channel();
            let me = Arc::downgrade(self);
            tokio::spawn(async move {
                while let Some(item) = rx.recv().await {
                    let Some(me) = me.upgrade() else { return };
                    match item {
                        // Off the async threads: opening a log may recover it.
                        Inbound::Changes(changes) => {
                            let _ = tokio::task::spawn_blocking(move || me.deliver(changes)).await;
                        }
                        Inbound::Reply(r) => me.complete(r),
                        Inbound::Barrier(done) => {
                            let _ = done.send(());
                        }
                    }
                }
            });
            tx
        });
        let _ = tx.send(item);
    }

    /// Hands a reply to its caller: at once if it is eager, else after the
    /// instructions that came before it (a CreateTopics answered only once
    /// this broker hosts the partitions it leads).
    fn on_reply(self: &Arc<Self>, r: pb::Reply) {
        let eager = self
            .pending
            .lock()
            .expect("pending lock")
            .get(&r.id)
            .is_some_and(|p| p.eager);
        match eager {
            true => self.complete(r),
            false => self.apply_in_order(Inbound::Reply(r)),
        }
    }

    /// The cluster id this broker's log directory belongs to; registrations
    /// carry it from now on.
    pub fn set_cluster_id(&self, cluster_id: Option<String>) {
        *self.cluster_id.lock().expect("cluster id lock") = cluster_id;
    }

    /// Serves `BrokerControl` on `addr` until the returned task is aborted;
    /// with `tls`, only to a controller with a certificate from its CA (and
    /// its subject, if one is configured). The keystore and truststore are
    /// read again when they change (a renewed certificate in a mounted
    /// Secret): the next session gets them, open ones go on.
    pub async fn serve(
        self: &Arc<Self>,
        addr: SocketAddr,
        tls: Option<&crate::config::ControlTls>,
    ) -> anyhow::Result<tokio::task::JoinHandle<()>> {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| anyhow::anyhow!("cannot listen for the controller on {addr}: {e}"))?;
        let svc = BrokerControlServer::new(ControlService(self.clone()))
            .max_decoding_message_size(skein_controller::rpc::MAX_MESSAGE_BYTES)
            .max_encoding_message_size(skein_controller::rpc::MAX_MESSAGE_BYTES);
        let server = tonic::transport::Server::builder()
            .http2_keepalive_interval(Some(Duration::from_secs(5)))
            .http2_keepalive_timeout(Some(skein_controller::rpc::KEEPALIVE_TIMEOUT))
            .initial_stream_window_size(skein_controller::rpc::STREAM_WINDOW_BYTES)
            .initial_connection_window_size(skein_controller::rpc::CONNECTION_WINDOW_BYTES);
        let Some(tls) = tls else {
            let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
            return Ok(spawn_server(server.serve_with_incoming(svc, incoming)));
        };
        let files = tls.files.clone();
        let config = crate::tls::Reloading::watching(
            "control port".into(),
            vec![files.keystore.clone(), files.truststore.clone()],
            move || skein_controller::rpc::tls::server_config(&files).map(Arc::unwrap_or_clone),
        )
        .map_err(|e| anyhow::anyhow!("control-plane TLS: {e}"))?;
        let config = Arc::new(config);
        let subject = tls.controller_subject.clone();
        let check = Arc::new(move |certs: &[rustls::pki_types::CertificateDer<'_>]| {
            let Some(want) = &subject else { return Ok(()) };
            let leaf = certs.first().ok_or("no client certificate")?;
            let got = crate::ssl_principal::subject_name(leaf)?;
            match got == *want {
                true => Ok(()),
                false => Err(format!(
                    "certificate subject {got} is not the controller's ({want})"
                )),
            }
        });
        let incoming =
            skein_controller::rpc::tls::incoming(listener, Arc::new(move || config.get()), check);
        Ok(spawn_server(server.serve_with_incoming(svc, incoming)))
    }

    /// Sends `kind` on the current session and waits for its reply, at most
    /// `timeout`. A session that ends first fails the call at once.
    fn call(
        &self,
        kind: request::Kind,
        wait_for_session: Duration,
        timeout: Duration,
    ) -> Result<pb::Reply, ControlPlaneError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let eager = matches!(
            kind,
            request::Kind::Register(_) | request::Kind::Heartbeat(_)
        );
        let (tx, rx) = std_mpsc::channel();
        let sent = {
            let guard = self.session.lock().expect("session lock");
            let (guard, _) = self
                .session_changed
                .wait_timeout_while(guard, wait_for_session, |s| s.is_none())
                .expect("session lock");
            match guard.as_ref() {
                Some(s) => {
                    // Registered before the send, under the session lock:
                    // the session cannot end (and forget it) in between.
                    self.pending.lock().expect("pending lock").insert(
                        id,
                        Pending {
                            generation: s.generation,
                            reply: tx,
                            eager,
                        },
                    );
                    s.outbound
                        .send(Ok(BrokerMessage {
                            kind: Some(pb::broker_message::Kind::Request(pb::Request {
                                id,
                                kind: Some(kind),
                            })),
                        }))
                        .is_ok()
                }
                None => false,
            }
        };
        let result = if sent {
            rx.recv_timeout(timeout).map_err(|e| match e {
                std_mpsc::RecvTimeoutError::Timeout => ControlPlaneError::Timeout,
                std_mpsc::RecvTimeoutError::Disconnected => {
                    not_controller("the controller session ended before the answer")
                }
            })
        } else {
            Err(not_controller("no session with the controller"))
        };
        self.pending.lock().expect("pending lock").remove(&id);
        result
    }

    /// Fails every request still waiting on the session `generation`.
    fn fail_pending(&self, generation: u64) {
        self.pending
            .lock()
            .expect("pending lock")
            .retain(|_, p| p.generation != generation);
    }

    /// Waits (indefinitely) for a controller session and registers on it,
    /// unless this session is registered already. One registration at a
    /// time per session.
    fn ensure_registered(&self) -> Result<u64, ControlPlaneError> {
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
            let result = self.call(
                request::Kind::Register(reg.clone()),
                Duration::ZERO,
                REQUEST_TIMEOUT,
            );
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
                        // The next session's registration (a new controller)
                        // comes from this same running process: clean.
                        if let Some(reg) = self
                            .registration
                            .lock()
                            .expect("registration lock")
                            .as_mut()
                        {
                            reg.previous_broker_epoch = Some(epoch);
                        }
                        return Ok(epoch);
                    }
                }
                Ok(r) => {
                    return Err(ControlPlaneError::Controller(ControllerError::Remote {
                        code: r.error_code as i16,
                        message: r.error_message,
                    }))
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
        let replaced = self.session.lock().expect("session lock").replace(Session {
            generation,
            outbound,
            broker_epoch: None,
            registering: false,
        });
        if let Some(old) = replaced {
            // A new controller (or a reconnect): the old one will not answer.
            self.fail_pending(old.generation);
        }
        self.session_changed.notify_all();
        generation
    }

    fn close_session(&self, generation: u64) {
        let mut s = self.session.lock().expect("session lock");
        if s.as_ref().map(|s| s.generation) == Some(generation) {
            *s = None;
        }
        self.fail_pending(generation);
        self.session_changed.notify_all();
    }

    fn set_view(&self, view: ClusterView) {
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
        let link = self.link.lock().expect("link lock").clone();
        if let Some(link) = link {
            if !changed.is_empty() {
                link.topic_configs_changed(changed);
            }
            if old.broker_configs != new.broker_configs {
                link.broker_configs_changed();
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
        if let Some(p) = self.pending.lock().expect("pending lock").remove(&r.id) {
            let _ = p.reply.send(r);
        }
    }
}

impl ControlPlane for RemoteController {
    fn view(&self) -> Arc<ClusterView> {
        self.view.read().expect("view lock").clone()
    }

    fn handle(&self, event: Event) -> Result<Vec<Reply>, ControlPlaneError> {
        match &event {
            Event::BrokerRegistered { .. } => {
                let Some(request::Kind::Register(mut reg)) = event_to_pb(&event) else {
                    unreachable!("register event")
                };
                reg.cluster_id = self.cluster_id.lock().expect("cluster id lock").clone();
                *self.registration.lock().expect("registration lock") = Some(reg);
                let epoch = crate::system::blocking(|| self.ensure_registered())?;
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
            return Err(ControlPlaneError::NotCarried);
        };
        // A heartbeat that is not answered soon is not waited for: the next
        // one goes out on whatever session is current by then.
        let timeout = match &event {
            Event::BrokerHeartbeat { .. } => HEARTBEAT_TIMEOUT,
            _ => REQUEST_TIMEOUT,
        };
        let r = crate::system::blocking(|| self.call(kind, Duration::from_secs(5), timeout))?;
        let reply = reply_from_pb(&event, r);
        if let Reply::Heartbeat {
            result: Err(ControllerError::Remote { code, .. }),
            ..
        } = &reply
        {
            // Fenced or unknown: the next `register` makes a new registration.
            if *code == STALE_BROKER_EPOCH || *code == BROKER_ID_NOT_REGISTERED {
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
        self.leaving.store(true, Ordering::SeqCst);
        *self.link.lock().expect("link lock") = None;
    }

    fn wait_applied(&self) {
        let Some(tx) = self.applier.lock().expect("applier lock").clone() else {
            return;
        };
        let (done, wait) = std_mpsc::channel();
        if tx.send(Inbound::Barrier(done)).is_ok() {
            let _ = wait.recv();
        }
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
        if me.leaving.load(Ordering::SeqCst) {
            return Err(tonic::Status::unavailable("this broker is shutting down"));
        }
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
                    Some(controller_message::Kind::Metadata(v)) => {
                        let started = std::time::Instant::now();
                        let current = me.view();
                        match apply_view_pb(&current, v) {
                            Ok(view) => {
                                let version = view.version;
                                me.set_view(view);
                                tracing::debug!(
                                    version,
                                    ms = started.elapsed().as_millis() as u64,
                                    "controller view applied"
                                );
                            }
                            Err(e) => {
                                // Out of step: a new session starts from a
                                // whole view.
                                tracing::warn!(error = %e, "controller session out of step; reconnecting");
                                break;
                            }
                        }
                    }
                    // Applied in order in the background: the session goes
                    // on reading (views, eager replies) meanwhile.
                    Some(controller_message::Kind::Changes(c)) => {
                        me.apply_in_order(Inbound::Changes(changes_from_pb(c)))
                    }
                    Some(controller_message::Kind::Reply(r)) => me.on_reply(r),
                    // A message of a newer controller's release: nothing
                    // this broker can act on (what it must know arrives in
                    // the kinds above, which every release since 0.1.0 has).
                    None => tracing::warn!(
                        "a controller message of a kind this broker does not know; ignored"
                    ),
                }
            }
            me.close_session(generation);
            tracing::info!(generation, "controller session closed");
        });
        Ok(tonic::Response::new(UnboundedReceiverStream::new(rx)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    fn heartbeat() -> request::Kind {
        let Some(kind) = event_to_pb(&Event::BrokerHeartbeat {
            broker: 1,
            broker_epoch: 1,
        }) else {
            unreachable!("a heartbeat is carried")
        };
        kind
    }

    /// A request sent on a session whose controller died (SIGKILL: the
    /// stream ends) fails at once, so the broker's next heartbeat goes to
    /// the new controller instead of waiting out the request timeout while
    /// the new controller fences it.
    #[test]
    fn a_request_fails_when_its_session_ends_not_after_the_timeout() {
        let rc = RemoteController::new(1);
        let (tx, mut rx) = mpsc::unbounded_channel();
        let generation = rc.open_session(tx);
        let caller = {
            let rc = rc.clone();
            std::thread::spawn(move || {
                let t0 = Instant::now();
                let r = rc.call(heartbeat(), Duration::ZERO, REQUEST_TIMEOUT);
                (r, t0.elapsed())
            })
        };
        // The request went out on the session...
        let sent = rx.blocking_recv().expect("the request").expect("ok");
        assert!(matches!(
            sent.kind,
            Some(pb::broker_message::Kind::Request(_))
        ));
        // ...and the session ends without an answer.
        rc.close_session(generation);
        let (r, took) = caller.join().expect("caller");
        assert!(
            matches!(r, Err(ControlPlaneError::NoController(_))),
            "{r:?}"
        );
        assert!(took < Duration::from_secs(5), "waited {took:?}");
    }

    /// A new session replacing the old one (a new controller dialled in
    /// before the old stream's end was seen) fails the old one's requests.
    #[test]
    fn a_replaced_session_fails_its_requests_and_the_new_one_answers() {
        let rc = RemoteController::new(1);
        let (old_tx, mut old_rx) = mpsc::unbounded_channel();
        rc.open_session(old_tx);
        let caller = {
            let rc = rc.clone();
            std::thread::spawn(move || rc.call(heartbeat(), Duration::ZERO, REQUEST_TIMEOUT))
        };
        old_rx.blocking_recv().expect("the request").expect("ok");
        let (new_tx, mut new_rx) = mpsc::unbounded_channel();
        rc.open_session(new_tx);
        assert!(matches!(
            caller.join().expect("caller"),
            Err(ControlPlaneError::NoController(_))
        ));
        // The next request goes out on the new session and gets its answer.
        let caller = {
            let rc = rc.clone();
            std::thread::spawn(move || rc.call(heartbeat(), Duration::ZERO, REQUEST_TIMEOUT))
        };
        let Some(pb::broker_message::Kind::Request(req)) = new_rx
            .blocking_recv()
            .expect("the request")
            .expect("ok")
            .kind
        else {
            panic!("not a request")
        };
        rc.complete(pb::Reply {
            id: req.id,
            error_code: 0,
            error_message: String::new(),
            result: None,
        });
        let r = caller.join().expect("caller").expect("answered");
        assert_eq!(r.id, req.id);
    }

    /// A heartbeat nobody answers gives up after its own short timeout.
    #[test]
    fn an_unanswered_call_times_out() {
        let rc = RemoteController::new(1);
        let (tx, _rx) = mpsc::unbounded_channel();
        rc.open_session(tx);
        let t0 = Instant::now();
        let r = rc.call(heartbeat(), Duration::ZERO, Duration::from_millis(200));
        assert!(matches!(r, Err(ControlPlaneError::Timeout)), "{r:?}");
        assert!(t0.elapsed() < Duration::from_secs(5));
        assert!(rc.pending.lock().unwrap().is_empty());
    }

    /// A link whose deliveries wait until the test lets them through.
    struct GatedLink(Mutex<std_mpsc::Receiver<()>>);

    impl BrokerLink for GatedLink {
        fn deliver(&self, _changes: Vec<PartitionChange>) {
            let _ = self.0.lock().unwrap().recv();
        }
    }

    fn sent_id(rx: &mut mpsc::UnboundedReceiver<Result<BrokerMessage, tonic::Status>>) -> u64 {
        match rx.blocking_recv().expect("a request").expect("ok").kind {
            Some(pb::broker_message::Kind::Request(req)) => req.id,
            other => panic!("not a request: {other:?}"),
        }
    }

    fn answer(id: u64) -> pb::Reply {
        pb::Reply {
            id,
            error_code: 0,
            error_message: String::new(),
            result: None,
        }
    }

    /// While the session's instructions are still being applied (a broker
    /// back at 10,000 partitions), the registration's answer reaches its
    /// caller at once, so the broker knows its epoch and starts
    /// heartbeating; any other answer (a CreateTopics') still waits for the
    /// instructions sent before it, and so does `wait_applied`.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_registration_is_answered_before_the_instructions_ahead_of_it_are_applied() {
        let rc = RemoteController::new(1);
        let (release, gate) = std_mpsc::channel();
        rc.attach(1, Arc::new(GatedLink(Mutex::new(gate))));
        let (tx, mut rx) = mpsc::unbounded_channel();
        rc.open_session(tx);
        let call = |kind: request::Kind| {
            let rc = rc.clone();
            let (done, result) = std_mpsc::channel();
            std::thread::spawn(move || {
                let _ = done.send(rc.call(kind, Duration::ZERO, REQUEST_TIMEOUT));
            });
            result
        };
        let registered = call(request::Kind::Register(pb::Register::default()));
        let register_id = tokio::task::block_in_place(|| sent_id(&mut rx));
        let created = call(request::Kind::CreateTopic(pb::CreateTopic::default()));
        let create_id = tokio::task::block_in_place(|| sent_id(&mut rx));

        // The controller's order: the roles, then the two answers.
        rc.apply_in_order(Inbound::Changes(Vec::new()));
        rc.on_reply(answer(register_id));
        rc.on_reply(answer(create_id));
        let applied = {
            let rc = rc.clone();
            let (done, result) = std_mpsc::channel();
            std::thread::spawn(move || {
                rc.wait_applied();
                let _ = done.send(());
            });
            result
        };

        let r = tokio::task::block_in_place(|| registered.recv_timeout(Duration::from_secs(5)));
        assert_eq!(r.expect("answered at once").expect("ok").id, register_id);
        std::thread::sleep(Duration::from_millis(300));
        assert!(created.try_recv().is_err(), "waits for the roles");
        assert!(applied.try_recv().is_err(), "the roles are not applied yet");

        release.send(()).unwrap();
        let r = tokio::task::block_in_place(|| created.recv_timeout(Duration::from_secs(5)));
        assert_eq!(r.expect("answered").expect("ok").id, create_id);
        tokio::task::block_in_place(|| applied.recv_timeout(Duration::from_secs(5)))
            .expect("applied");
    }
}
