//! TLS for the control plane: the controller's gRPC sessions to the
//! brokers' control ports, with mutual authentication. The controller
//! checks the broker's certificate (its CA, and the host it dialled); the
//! broker requires a client certificate from the controller's CA and may
//! insist on the controller's exact subject. Without it, anyone who reaches
//! a control port could tell a broker to lead, follow or truncate.
//!
//! Both ends speak HTTP/2 over the TLS stream they make here (ALPN `h2`);
//! tonic is handed the stream, so the URIs stay `http://host:port`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use tokio::net::{TcpListener, TcpStream};

/// How long a peer has to finish the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// One end's PEM material.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControlTlsFiles {
    /// The private key (PKCS#8, PKCS#1 or SEC1) and certificate chain.
    pub keystore: PathBuf,
    /// The CA certificates the other end's certificate must chain to.
    pub truststore: PathBuf,
}

fn read(path: &PathBuf) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
}

type Material = (
    Vec<CertificateDer<'static>>,
    PrivateKeyDer<'static>,
    RootCertStore,
);

fn load(files: &ControlTlsFiles) -> Result<Material, String> {
    let keystore = read(&files.keystore)?;
    let truststore = read(&files.truststore)?;
    parse(
        &keystore,
        &files.keystore.display().to_string(),
        &truststore,
        &files.truststore.display().to_string(),
    )
}

/// The key, chain and roots from PEM text (`ks_name` / `ts_name` name them
/// in errors).
fn parse(
    keystore: &[u8],
    ks_name: &str,
    truststore: &[u8],
    ts_name: &str,
) -> Result<Material, String> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(keystore)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{ks_name}: {e}"))?;
    if chain.is_empty() {
        return Err(format!("no certificate in {ks_name}"));
    }
    let key = PrivateKeyDer::from_pem_slice(keystore)
        .map_err(|e| format!("no usable private key in {ks_name}: {e}"))?;
    let mut roots = RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(truststore) {
        let c = c.map_err(|e| format!("{ts_name}: {e}"))?;
        roots
            .add(c)
            .map_err(|e| format!("bad CA certificate in {ts_name}: {e}"))?;
    }
    if roots.is_empty() {
        return Err(format!("no CA certificate in {ts_name}"));
    }
    Ok((chain, key, roots))
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The controller's side: trusts the brokers' CA, checks the dialled host
/// against the broker's certificate, presents its own certificate.
pub fn client_config(files: &ControlTlsFiles) -> Result<Arc<ClientConfig>, String> {
    client_config_from(load(files)?, &files.keystore.display().to_string())
}

/// [`client_config`] from PEM text held in memory (the Kubernetes
/// operator keeps its certificate in a Secret).
pub fn client_config_pem(keystore: &[u8], truststore: &[u8]) -> Result<Arc<ClientConfig>, String> {
    let material = parse(
        keystore,
        "the controller keystore",
        truststore,
        "the CA certificate",
    )?;
    client_config_from(material, "the controller keystore")
}

fn client_config_from(
    (chain, key, roots): Material,
    ks_name: &str,
) -> Result<Arc<ClientConfig>, String> {
    let mut config = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_client_auth_cert(chain, key)
        .map_err(|e| format!("{ks_name}: {e}"))?;
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(Arc::new(config))
}

/// The broker's side: requires a client certificate from the controller's
/// CA.
pub fn server_config(files: &ControlTlsFiles) -> Result<Arc<ServerConfig>, String> {
    let (chain, key, roots) = load(files)?;
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
        .build()
        .map_err(|e| e.to_string())?;
    let mut config = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .map_err(|e| format!("{}: {e}", files.keystore.display()))?;
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(Arc::new(config))
}

/// The controller's TLS client settings as they are now, asked again for
/// every new connection: renewed certificates are taken by the next
/// session without ending the open ones. `None`: plaintext.
pub type ClientTls = Arc<dyn Fn() -> Option<Arc<ClientConfig>> + Send + Sync>;

/// [`ClientTls`] that never changes.
pub fn fixed_client_tls(tls: Option<Arc<ClientConfig>>) -> ClientTls {
    Arc::new(move || tls.clone())
}

/// A control port's TLS server settings as they are now, asked again for
/// every connection accepted: a broker re-reads its certificate files when
/// they change.
pub type ServerTls = Arc<dyn Fn() -> Arc<ServerConfig> + Send + Sync>;

/// A channel to `endpoint` (`http://host:port`), over TLS when `tls` is
/// given.
pub async fn connect(
    endpoint: tonic::transport::Endpoint,
    tls: Option<Arc<ClientConfig>>,
) -> Result<tonic::transport::Channel, String> {
    let Some(config) = tls else {
        return endpoint.connect().await.map_err(|e| e.to_string());
    };
    let connector = tower::service_fn(move |uri: http::Uri| {
        let config = config.clone();
        async move {
            let bad = |why: String| std::io::Error::new(std::io::ErrorKind::InvalidInput, why);
            let host = uri
                .host()
                .ok_or_else(|| bad(format!("{uri} has no host")))?
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_string();
            let port = uri.port_u16().unwrap_or(80);
            let tcp = TcpStream::connect((host.as_str(), port)).await?;
            tcp.set_nodelay(true)?;
            let name = ServerName::try_from(host.clone())
                .map_err(|e| bad(format!("'{host}' as a TLS server name: {e}")))?;
            let tls = tokio::time::timeout(
                HANDSHAKE_TIMEOUT,
                tokio_rustls::TlsConnector::from(config).connect(name, tcp),
            )
            .await
            .map_err(|_| {
                std::io::Error::new(std::io::ErrorKind::TimedOut, "TLS handshake timed out")
            })??;
            Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(tls))
        }
    });
    endpoint
        .connect_with_connector(connector)
        .await
        .map_err(|e| format!("{e}: {}", source_chain(&e)))
}

fn source_chain(e: &dyn std::error::Error) -> String {
    let mut out = Vec::new();
    let mut cur = e.source();
    while let Some(s) = cur {
        out.push(s.to_string());
        cur = s.source();
    }
    out.join(": ")
}

/// A TLS connection to a broker's control port, as tonic's server takes it.
pub struct ControlStream(tokio_rustls::server::TlsStream<TcpStream>);

impl tonic::transport::server::Connected for ControlStream {
    type ConnectInfo = ();
    fn connect_info(&self) -> Self::ConnectInfo {}
}

impl tokio::io::AsyncRead for ControlStream {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl tokio::io::AsyncWrite for ControlStream {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.0).poll_write(cx, buf)
    }
    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_flush(cx)
    }
    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

/// Looks at a peer's certificate chain (leaf first): Err refuses it.
pub type PeerCheck = Arc<dyn Fn(&[CertificateDer<'_>]) -> Result<(), String> + Send + Sync>;

/// The accepted, authenticated connections of a control port: each TLS
/// handshake runs on its own task, so a slow or hostile peer holds up no
/// one; each takes the settings `config` gives at that moment (renewed
/// certificates serve the next connection); `check` looks at the peer's
/// certificate chain (leaf first) and may refuse it. Refusals are logged,
/// at most once per 10 s.
pub fn incoming(
    listener: TcpListener,
    config: ServerTls,
    check: PeerCheck,
) -> tokio_stream::wrappers::ReceiverStream<std::io::Result<ControlStream>> {
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    tokio::spawn(async move {
        let last_log = Arc::new(std::sync::Mutex::new(None::<std::time::Instant>));
        loop {
            let accepted = tokio::select! {
                a = listener.accept() => a,
                // The server is gone: stop listening.
                _ = tx.closed() => break,
            };
            let (tcp, peer) = match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!(error = %e, "control port accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let (acceptor, tx, check, last_log) = (
                tokio_rustls::TlsAcceptor::from(config()),
                tx.clone(),
                check.clone(),
                last_log.clone(),
            );
            tokio::spawn(async move {
                let _ = tcp.set_nodelay(true);
                let refused = |why: String| {
                    let mut last = last_log.lock().expect("log lock");
                    if last.is_none_or(|t| t.elapsed() >= Duration::from_secs(10)) {
                        *last = Some(std::time::Instant::now());
                        tracing::warn!(%peer, reason = %why, "control-plane connection refused");
                    }
                };
                let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await
                {
                    Ok(Ok(s)) => s,
                    Ok(Err(e)) => return refused(format!("TLS handshake failed: {e}")),
                    Err(_) => return refused("TLS handshake timed out".into()),
                };
                let certs = tls.get_ref().1.peer_certificates().unwrap_or_default();
                if let Err(why) = check(certs) {
                    return refused(why);
                }
                let _ = tx.send(Ok(ControlStream(tls))).await;
            });
        }
    });
    tokio_stream::wrappers::ReceiverStream::new(rx)
}
