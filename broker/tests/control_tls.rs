//! Mutual TLS on the control plane: a broker's control port takes a
//! session only from a client with a certificate of the controller's CA and
//! the controller's subject; the controller takes only a broker whose
//! certificate its CA signed for the host it dialled.

use std::path::Path;
use std::time::Duration;

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
use skein_broker::config::ControlTls;
use skein_broker::remote_controller::RemoteController;
use skein_controller::rpc::tls::{client_config, ControlTlsFiles};
use skein_controller::rpc::{drive_session, SessionEnd};
use skein_controller::{ControllerConfig, ControllerService};

fn ca(name: &str) -> CertifiedIssuer<'static, KeyPair> {
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.distinguished_name.push(DnType::CommonName, name);
    CertifiedIssuer::self_signed(p, KeyPair::generate().unwrap()).unwrap()
}

/// Writes `<name>.pem` (key and certificate) signed by `issuer`.
fn leaf(dir: &Path, name: &str, cn: &str, sans: &[&str], issuer: &CertifiedIssuer<'_, KeyPair>) {
    let mut p =
        CertificateParams::new(sans.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
    p.distinguished_name.push(DnType::CommonName, cn);
    let key = KeyPair::generate().unwrap();
    let cert = p.signed_by(&key, issuer).unwrap();
    std::fs::write(
        dir.join(format!("{name}.pem")),
        format!("{}{}", key.serialize_pem(), cert.pem()),
    )
    .unwrap();
}

fn files(dir: &Path, name: &str, ca: &str) -> ControlTlsFiles {
    ControlTlsFiles {
        keystore: dir.join(format!("{name}.pem")),
        truststore: dir.join(format!("{ca}.pem")),
    }
}

/// Runs one session attempt for up to 3 s: `true` if it was still open then.
async fn session_holds(addr: std::net::SocketAddr, tls: Option<ControlTlsFiles>) -> bool {
    let controller = ControllerService::open(None, ControllerConfig::default()).unwrap();
    let tls = tls.map(|f| client_config(&f).unwrap());
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let session = tokio::spawn(drive_session(
        controller,
        format!("http://{addr}"),
        Some(1),
        stop_rx,
        None,
        tls,
    ));
    tokio::time::sleep(Duration::from_secs(3)).await;
    let open = !session.is_finished();
    let _ = stop_tx.send(true);
    let end = tokio::time::timeout(Duration::from_secs(10), session)
        .await
        .unwrap()
        .unwrap();
    if !open {
        assert!(matches!(end, SessionEnd::Unreachable(_)), "{end:?}");
    }
    open
}

#[tokio::test]
async fn the_control_port_serves_only_the_controller_and_the_controller_only_brokers() {
    let _ = tracing_subscriber::fmt().with_test_writer().try_init();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let good = ca("skein-test CA");
    std::fs::write(d.join("ca.pem"), good.pem()).unwrap();
    let other = ca("another CA");
    std::fs::write(d.join("other-ca.pem"), other.pem()).unwrap();
    leaf(d, "broker", "skein-broker-1", &["127.0.0.1"], &good);
    leaf(d, "controller", "skein-controller", &[], &good);
    leaf(d, "client", "skein-client", &[], &good);
    leaf(d, "rogue-controller", "skein-controller", &[], &other);
    leaf(d, "elsewhere", "skein-broker-1", &["10.9.9.9"], &good);

    let serve = |keystore: &str| {
        let tls = ControlTls {
            files: files(d, keystore, "ca"),
            controller_subject: Some("CN=skein-controller".into()),
        };
        async move {
            let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = probe.local_addr().unwrap();
            drop(probe);
            let task = RemoteController::new(1)
                .serve(addr, Some(&tls))
                .await
                .unwrap();
            (addr, task)
        }
    };

    let (addr, task) = serve("broker").await;
    // The controller's certificate, the broker's certificate for this host: a session.
    assert!(session_holds(addr, Some(files(d, "controller", "ca"))).await);
    // Another certificate of the same CA (a client's, or another broker's): refused.
    assert!(!session_holds(addr, Some(files(d, "client", "ca"))).await);
    // The controller's subject from another CA: refused.
    assert!(!session_holds(addr, Some(files(d, "rogue-controller", "other-ca"))).await);
    // No TLS at all: refused.
    assert!(!session_holds(addr, None).await);
    // The controller does not trust the broker's CA: it does not talk to it.
    assert!(!session_holds(addr, Some(files(d, "controller", "other-ca"))).await);
    // And the port still serves the controller after all that.
    assert!(session_holds(addr, Some(files(d, "controller", "ca"))).await);
    task.abort();

    // A broker whose certificate names another host than the one dialled.
    let (addr, task) = serve("elsewhere").await;
    assert!(!session_holds(addr, Some(files(d, "controller", "ca"))).await);
    task.abort();
}

#[test]
fn control_plane_tls_is_mutual_or_nothing() {
    let raw = |pairs: &[(&str, &str)]| {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<std::collections::BTreeMap<_, _>>()
    };
    let e = skein_broker::config::BrokerConfig::from_map(raw(&[(
        "control.ssl.keystore.location",
        "/k.pem",
    )]))
    .unwrap_err();
    assert!(e.to_string().contains("mutual"), "{e}");
    let ok = skein_broker::config::BrokerConfig::from_map(raw(&[
        ("control.ssl.keystore.location", "/k.pem"),
        ("control.ssl.truststore.location", "/ca.pem"),
    ]))
    .unwrap();
    assert!(ok
        .control_tls
        .is_some_and(|t| t.controller_subject.is_none()));
}
