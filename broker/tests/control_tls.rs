//! Who a broker's control port takes a session from. Mutual TLS on the
//! control plane: only a client with a certificate of the controller's CA
//! and the controller's subject; the controller takes only a broker whose
//! certificate its CA signed for the host it dialled. Renewed certificate
//! files are taken by the next session, without a restart. And nobody once
//! the broker has begun to stop: a controller that dials it then (its name
//! still resolves while the process shuts down) must not have it register
//! again with a new broker epoch and pass for the broker that replaces it
//! (a rolling restart would go on to the next pod while the restarted one
//! never came back).

use std::path::Path;
use std::time::Duration;

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
use skein_broker::config::ControlTls;
use skein_broker::remote_controller::RemoteController;
use skein_controller::plane::ControlPlane;
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

/// Writes `<name>.pem` as a mounted Secret is updated: a new file renamed
/// over the old one.
fn replace(dir: &Path, name: &str, write: impl FnOnce(&Path)) {
    let staging = dir.join("staging");
    std::fs::create_dir_all(&staging).unwrap();
    write(&staging);
    std::fs::rename(
        staging.join(format!("{name}.pem")),
        dir.join(format!("{name}.pem")),
    )
    .unwrap();
}

/// The certificate (DER) at the start of a PEM keystore file.
fn certificate(path: &Path) -> Vec<u8> {
    use rustls::pki_types::pem::PemObject;
    rustls::pki_types::CertificateDer::pem_file_iter(path)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .to_vec()
}

/// The certificate the control port at `addr` serves to a client with
/// `files` (`None`: the handshake failed).
async fn served(addr: std::net::SocketAddr, files: &ControlTlsFiles) -> Option<Vec<u8>> {
    let config = client_config(files).unwrap();
    let tcp = tokio::net::TcpStream::connect(addr).await.ok()?;
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
    let tls = tokio_rustls::TlsConnector::from(config)
        .connect(name, tcp)
        .await
        .ok()?;
    Some(tls.get_ref().1.peer_certificates()?.first()?.to_vec())
}

/// Waits (up to 20 s: the broker looks at its files at most every 5 s)
/// until the port serves the certificate of `keystore` to `files`.
async fn wait_served(addr: std::net::SocketAddr, files: &ControlTlsFiles, keystore: &Path) {
    let want = certificate(keystore);
    for _ in 0..40 {
        if served(addr, files).await.as_ref() == Some(&want) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    panic!(
        "{} is not served: {} bytes served, {} wanted",
        keystore.display(),
        served(addr, files).await.map_or(0, |c| c.len()),
        want.len()
    );
}

/// The operator renews the brokers' certificate (same CA) and later
/// replaces the CA: the broker serves each new keystore, and trusts each
/// new CA, from the next session on, without a restart and without ending
/// the session it holds.
#[tokio::test]
async fn renewed_certificates_serve_the_next_session_without_a_restart() {
    let _ = tracing_subscriber::fmt().with_test_writer().try_init();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let first = ca("skein-test CA");
    std::fs::write(d.join("ca.pem"), first.pem()).unwrap();
    leaf(d, "broker", "skein-broker-1", &["127.0.0.1"], &first);
    leaf(d, "controller", "skein-controller", &[], &first);
    let tls = ControlTls {
        files: files(d, "broker", "ca"),
        controller_subject: Some("CN=skein-controller".into()),
    };
    let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = probe.local_addr().unwrap();
    drop(probe);
    let task = RemoteController::new(1)
        .serve(addr, Some(&tls))
        .await
        .unwrap();
    let controller = files(d, "controller", "ca");
    assert_eq!(
        served(addr, &controller).await,
        Some(certificate(&d.join("broker.pem")))
    );
    // A session opened before the renewal.
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let held = tokio::spawn(drive_session(
        ControllerService::open(None, ControllerConfig::default()).unwrap(),
        format!("http://{addr}"),
        Some(1),
        stop_rx,
        None,
        Some(client_config(&controller).unwrap()),
    ));

    // Renewal: a new key and certificate from the same CA.
    replace(d, "broker", |s| {
        leaf(s, "broker", "skein-broker-1", &["127.0.0.1"], &first)
    });
    wait_served(addr, &controller, &d.join("broker.pem")).await;

    // A new CA: both ends get certificates of it; the broker trusts only it.
    let second = ca("skein-test CA 2");
    leaf(d, "controller-2", "skein-controller", &[], &second);
    std::fs::write(d.join("ca-2.pem"), second.pem()).unwrap();
    replace(d, "broker", |s| {
        leaf(s, "broker", "skein-broker-1", &["127.0.0.1"], &second)
    });
    replace(d, "ca", |s| {
        std::fs::write(s.join("ca.pem"), second.pem()).unwrap()
    });
    let controller_2 = files(d, "controller-2", "ca-2");
    wait_served(addr, &controller_2, &d.join("broker.pem")).await;

    // The session from before both changes is still open (the probes above
    // were TLS handshakes only; a new session would replace it).
    assert!(
        !held.is_finished(),
        "the session held through the renewals ended"
    );
    let _ = stop_tx.send(true);
    let _ = tokio::time::timeout(Duration::from_secs(10), held).await;
    // New sessions: the new CA's controller, yes; the old CA's, no.
    assert!(session_holds(addr, Some(controller_2)).await);
    assert!(!session_holds(addr, Some(files(d, "controller", "ca-2"))).await);
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

#[tokio::test]
async fn a_stopping_broker_takes_no_new_controller_session() {
    let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = probe.local_addr().unwrap();
    drop(probe);
    let rc = RemoteController::new(1);
    let task = rc.clone().serve(addr, None).await.unwrap();
    assert!(
        session_holds(addr, None).await,
        "a running broker takes a session"
    );
    // What `Broker::stop` does after its controlled shutdown.
    rc.detach(1);
    assert!(
        !session_holds(addr, None).await,
        "a stopping broker must not take a session (and register again)"
    );
    task.abort();
}
