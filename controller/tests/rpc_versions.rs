//! The control plane across releases: a broker of a newer release talking to
//! this controller over a real gRPC session. What it says that this release
//! knows is kept (its release and feature levels); a request kind this
//! release does not know is answered `UNSUPPORTED_VERSION` at once rather than
//! left to the broker's 30 s request timeout.

use std::net::SocketAddr;
use std::time::Duration;

use skein_controller::rpc::pb::{
    self, broker_control_server::BrokerControl, broker_control_server::BrokerControlServer,
    broker_message, controller_message, request, BrokerMessage, ControllerMessage,
};
use skein_controller::rpc::session::drive_session;
use skein_controller::{ControllerConfig, ControllerService};
use tokio::sync::mpsc;
use tokio_stream::wrappers::UnboundedReceiverStream;
use tokio_stream::StreamExt;

/// A broker of a later release: it registers, then sends a request whose
/// kind this release does not have (an unknown oneof member reads as none),
/// and hands every message of the controller to the test.
struct NewerBroker {
    seen: mpsc::UnboundedSender<ControllerMessage>,
}

#[tonic::async_trait]
impl BrokerControl for NewerBroker {
    type SessionStream = UnboundedReceiverStream<Result<BrokerMessage, tonic::Status>>;

    async fn session(
        &self,
        request: tonic::Request<tonic::Streaming<ControllerMessage>>,
    ) -> Result<tonic::Response<Self::SessionStream>, tonic::Status> {
        let mut inbound = request.into_inner();
        let (tx, rx) = mpsc::unbounded_channel();
        let send = |id: u64, kind: Option<request::Kind>| {
            let _ = tx.send(Ok(BrokerMessage {
                kind: Some(broker_message::Kind::Request(pb::Request { id, kind })),
            }));
        };
        send(
            1,
            Some(request::Kind::Register(pb::Register {
                broker_id: 1,
                host: "127.0.0.1".into(),
                port: 9092,
                software_version: Some("9.9.0".into()),
                supported_features: vec![
                    pb::FeatureRange {
                        name: "skein.version".into(),
                        min_level: 1,
                        max_level: 7,
                    },
                    // A new cluster starts at transaction.version 2 and
                    // share.version and streams.version 1: a broker must run
                    // at them to register.
                    pb::FeatureRange {
                        name: "transaction.version".into(),
                        min_level: 0,
                        max_level: 3,
                    },
                    pb::FeatureRange {
                        name: "share.version".into(),
                        min_level: 0,
                        max_level: 2,
                    },
                    pb::FeatureRange {
                        name: "streams.version".into(),
                        min_level: 0,
                        max_level: 2,
                    },
                ],
                ..Default::default()
            })),
        );
        send(2, None);
        let seen = self.seen.clone();
        tokio::spawn(async move {
            // Keep the stream (and the session) open while the test reads.
            let _tx = tx;
            while let Some(Ok(m)) = inbound.next().await {
                if seen.send(m).is_err() {
                    break;
                }
            }
        });
        Ok(tonic::Response::new(UnboundedReceiverStream::new(rx)))
    }
}

fn reply_to(m: &ControllerMessage, id: u64) -> Option<&pb::Reply> {
    match &m.kind {
        Some(controller_message::Kind::Reply(r)) if r.id == id => Some(r),
        _ => None,
    }
}

#[tokio::test]
async fn a_newer_brokers_unknown_request_is_answered_and_its_release_is_kept() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    let (seen_tx, mut seen) = mpsc::unbounded_channel();
    tokio::spawn(tonic::transport::Server::builder().serve_with_incoming(
        BrokerControlServer::new(NewerBroker { seen: seen_tx }),
        tokio_stream::wrappers::TcpListenerStream::new(listener),
    ));
    let controller = ControllerService::open(None, ControllerConfig::default()).unwrap();
    let (_stop_tx, stop) = tokio::sync::watch::channel(false);
    tokio::spawn(drive_session(
        controller.clone(),
        format!("http://{addr}"),
        Some(1),
        stop,
        None,
        None,
    ));

    let (mut registered, mut unknown) = (None, None);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while registered.is_none() || unknown.is_none() {
        let m = tokio::time::timeout_at(deadline, seen.recv())
            .await
            .expect("both requests answered within 10 s (not left to the request timeout)")
            .expect("session open");
        registered = registered.or_else(|| reply_to(&m, 1).cloned());
        unknown = unknown.or_else(|| reply_to(&m, 2).cloned());
    }
    let registered = registered.unwrap();
    assert_eq!(registered.error_code, 0, "{registered:?}");
    let unknown = unknown.unwrap();
    assert_eq!(unknown.error_code, 35, "UNSUPPORTED_VERSION: {unknown:?}");
    assert!(unknown.error_message.contains("older"), "{unknown:?}");

    let image = controller.image();
    let b = &image.brokers[&1];
    assert_eq!(b.software.version.as_deref(), Some("9.9.0"));
    assert_eq!(b.software.supported("skein.version"), (1, 7));
    assert_eq!(
        b.software.supported("some.future.feature"),
        (1, 1),
        "a feature it did not name: level 1 only"
    );
    assert_eq!(
        controller.view().brokers[&1].software_version.as_deref(),
        Some("9.9.0"),
        "the view carries it (the operator's status.brokers[].version)"
    );
}
