//! The control port of a stopping broker: once the broker has begun to
//! stop, a controller that dials it (its name still resolves while the
//! process shuts down) gets no session, so the stopping process cannot
//! register again with a new broker epoch and pass for the broker that
//! replaces it (a rolling restart would then go on to the next pod while
//! the restarted one never came back).

use std::time::Duration;

use skein_broker::remote_controller::RemoteController;
use skein_controller::plane::ControlPlane;
use skein_controller::rpc::drive_session;
use skein_controller::{ControllerConfig, ControllerService};

/// Runs one session attempt for up to 3 s: `true` if it was still open then.
async fn session_holds(addr: std::net::SocketAddr) -> bool {
    let controller = ControllerService::open(None, ControllerConfig::default()).unwrap();
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let session = tokio::spawn(drive_session(
        controller,
        format!("http://{addr}"),
        Some(1),
        stop_rx,
        None,
        None,
    ));
    tokio::time::sleep(Duration::from_secs(3)).await;
    let open = !session.is_finished();
    let _ = stop_tx.send(true);
    let _ = tokio::time::timeout(Duration::from_secs(10), session).await;
    open
}

#[tokio::test]
async fn a_stopping_broker_takes_no_new_controller_session() {
    let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = probe.local_addr().unwrap();
    drop(probe);
    let rc = RemoteController::new(1);
    let task = rc.clone().serve(addr, None).await.unwrap();
    assert!(
        session_holds(addr).await,
        "a running broker takes a session"
    );
    // What `Broker::stop` does after its controlled shutdown.
    rc.detach(1);
    assert!(
        !session_holds(addr).await,
        "a stopping broker must not take a session (and register again)"
    );
    task.abort();
}
