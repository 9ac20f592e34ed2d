//! TLS for SSL listeners (rustls, no OpenSSL): the server configuration
//! built from a listener's PEM material, re-read when its files change
//! (Kubernetes rotates a mounted Secret in place), so certificates can be
//! renewed without a restart. [`Reloading`] does the same for the
//! inter-broker client and the control port.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;
use tracing::{info, warn};

use crate::listeners::{ClientAuth, Pem, TlsSettings};
use crate::principal::Principal;
use crate::ssl_principal::{subject_name, PrincipalMapper};

/// How long a client has to complete the TLS handshake.
const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// How often the files are looked at for a change (at most once per this
/// long, on a new connection).
const RELOAD_CHECK: Duration = Duration::from_secs(5);

/// A value built from TLS files (a server or client configuration), built
/// again when the files change: looked at on use, at most every
/// [`RELOAD_CHECK`]. Material that cannot be loaded leaves the last good
/// value in use.
pub struct Reloading<T> {
    /// For log lines: `listener SSL`, `inter-broker client`, `control port`.
    what: String,
    /// The files the value is built from.
    files: Vec<PathBuf>,
    build: Box<dyn Fn() -> Result<T, String> + Send + Sync>,
    current: RwLock<Arc<T>>,
    /// When the files were last looked at, and what they looked like then.
    checked: Mutex<(Instant, Vec<FileStamp>)>,
}

impl<T: 'static> Reloading<T> {
    /// Builds the value from a listener's settings now: material that
    /// cannot be loaded at start-up is an error.
    pub fn new(
        what: String,
        settings: TlsSettings,
        build: fn(&TlsSettings) -> Result<T, String>,
    ) -> Result<Self, String> {
        let files = files(&settings);
        Self::watching(what, files, move || build(&settings))
    }

    /// Builds the value with `build` now, and again whenever one of `files`
    /// changes.
    pub fn watching(
        what: String,
        files: Vec<PathBuf>,
        build: impl Fn() -> Result<T, String> + Send + Sync + 'static,
    ) -> Result<Self, String> {
        let stamps = stamps(&files);
        let value = build().map_err(|e| format!("{what}: {e}"))?;
        Ok(Self {
            what,
            files,
            build: Box::new(build),
            current: RwLock::new(Arc::new(value)),
            checked: Mutex::new((Instant::now(), stamps)),
        })
    }

    /// The newest value that could be built.
    pub fn get(&self) -> Arc<T> {
        self.reload_if_changed();
        self.current.read().expect("tls value lock").clone()
    }

    fn reload_if_changed(&self) {
        let mut checked = self.checked.lock().expect("tls check lock");
        if checked.0.elapsed() < RELOAD_CHECK {
            return;
        }
        checked.0 = Instant::now();
        let now = stamps(&self.files);
        if now == checked.1 {
            return;
        }
        match (self.build)() {
            Ok(value) => {
                *self.current.write().expect("tls value lock") = Arc::new(value);
                checked.1 = now;
                info!(what = %self.what, "TLS material changed on disk: reloaded");
            }
            // A half-written rotation: keep the old material and look again
            // next time.
            Err(e) => {
                warn!(what = %self.what, error = %e, "TLS material changed but cannot be loaded; keeping the previous one")
            }
        }
    }
}

/// A listener's TLS server configuration, reloaded when its files change.
pub struct TlsReloader {
    config: Reloading<ServerConfig>,
    /// `ssl.principal.mapping.rules`.
    mapper: PrincipalMapper,
}

/// A hash of a file's content (`None`: cannot be read).
type FileStamp = Option<u64>;

impl TlsReloader {
    /// Loads the material now: a listener that cannot serve TLS must not
    /// start at all.
    pub fn new(listener: &str, settings: TlsSettings) -> Result<Self, String> {
        let mapper = PrincipalMapper::parse(&settings.principal_mapping_rules)
            .map_err(|e| format!("listener {listener}: ssl.principal.mapping.rules: {e}"))?;
        Ok(Self {
            config: Reloading::new(format!("listener {listener}"), settings, build)?,
            mapper,
        })
    }

    /// The acceptor for a new connection, with the newest valid material.
    pub fn acceptor(&self) -> tokio_rustls::TlsAcceptor {
        tokio_rustls::TlsAcceptor::from(self.config.get())
    }

    /// The TLS handshake with a new client (within
    /// [`TLS_HANDSHAKE_TIMEOUT`]) and who the client is. Err: why it is
    /// turned away.
    pub async fn accept(
        &self,
        stream: TcpStream,
    ) -> Result<(TlsStream<TcpStream>, Option<Principal>), String> {
        let stream =
            match tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, self.acceptor().accept(stream)).await
            {
                Ok(Ok(s)) => s,
                Ok(Err(e)) => return Err(format!("TLS handshake failed: {e}")),
                Err(_) => return Err("TLS handshake timed out".to_string()),
            };
        let principal = self.principal(stream.get_ref().1)?;
        Ok((stream, principal))
    }

    /// Who a client that completed the handshake is: `User:<mapped subject>`
    /// of its certificate, `None` without one (`User:ANONYMOUS`, as in
    /// Kafka). A subject no mapping rule applies to is an error: the
    /// client is not authenticated.
    fn principal(&self, conn: &rustls::ServerConnection) -> Result<Option<Principal>, String> {
        let Some(cert) = conn.peer_certificates().and_then(|c| c.first()) else {
            return Ok(None);
        };
        let dn = subject_name(cert)?;
        Ok(Some(Principal::user(self.mapper.map(&dn)?)))
    }
}

/// Every file the settings read (inline PEM is not watched).
fn files(s: &TlsSettings) -> Vec<PathBuf> {
    [Some(&s.key), Some(&s.chain), s.truststore.as_ref()]
        .into_iter()
        .flatten()
        .filter_map(|p| match p {
            Pem::File(path) => Some(path.clone()),
            Pem::Inline(_) => None,
        })
        .collect()
}

/// A hash of each file's content (through symbolic links: a mounted Secret
/// is updated by swapping a link to a new directory). Content, not
/// modification time and size: a certificate replaced by one of the same
/// length within the file system's timestamp tick (a few milliseconds) must
/// not go unnoticed; the files are a few kilobytes, read every few seconds.
fn stamps(files: &[PathBuf]) -> Vec<FileStamp> {
    files
        .iter()
        .map(|path| {
            let bytes = std::fs::read(path).ok()?;
            let mut h = std::collections::hash_map::DefaultHasher::new();
            std::hash::Hash::hash(&bytes, &mut h);
            Some(std::hash::Hasher::finish(&h))
        })
        .collect()
}

fn read(p: &Pem, what: &str) -> Result<Vec<u8>, String> {
    match p {
        Pem::Inline(s) => Ok(s.as_bytes().to_vec()),
        Pem::File(path) => {
            std::fs::read(path).map_err(|e| format!("cannot read {what} {}: {e}", path.display()))
        }
    }
}

fn describe(p: &Pem) -> String {
    match p {
        Pem::File(path) => path.display().to_string(),
        Pem::Inline(_) => "the inline value".to_string(),
    }
}

pub(crate) fn certificates(p: &Pem, what: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let bytes = read(p, what)?;
    let certs = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("bad PEM in {what} {}: {e}", describe(p)))?;
    if certs.is_empty() {
        return Err(format!(
            "no certificate (-----BEGIN CERTIFICATE-----) in {what} {}",
            describe(p)
        ));
    }
    Ok(certs)
}

/// The private key of a listener's keystore (unencrypted PEM).
pub(crate) fn private_key(s: &TlsSettings) -> Result<PrivateKeyDer<'static>, String> {
    let key_bytes = read(&s.key, "keystore")?;
    if String::from_utf8_lossy(&key_bytes).contains("ENCRYPTED PRIVATE KEY") {
        return Err(format!(
            "the private key in {} is encrypted; encrypted keys are not supported yet",
            describe(&s.key)
        ));
    }
    PrivateKeyDer::from_pem_slice(&key_bytes).map_err(|e| {
        format!(
            "no usable private key (PKCS#8, PKCS#1 or SEC1 PEM) in {}: {e}",
            describe(&s.key)
        )
    })
}

/// `ssl.enabled.protocols` as rustls versions.
pub(crate) fn versions(s: &TlsSettings) -> Vec<&'static rustls::SupportedProtocolVersion> {
    let mut versions = Vec::new();
    if s.tls13 {
        versions.push(&rustls::version::TLS13);
    }
    if s.tls12 {
        versions.push(&rustls::version::TLS12);
    }
    versions
}

/// The CA certificates of a truststore.
pub(crate) fn roots(trust: &Pem) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    for c in certificates(trust, "truststore")? {
        roots
            .add(c)
            .map_err(|e| format!("bad CA certificate in truststore {}: {e}", describe(trust)))?;
    }
    Ok(roots)
}

/// Builds the server configuration a listener's settings describe.
pub fn build(s: &TlsSettings) -> Result<ServerConfig, String> {
    let key = private_key(s)?;
    let chain = certificates(&s.chain, "keystore")?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let versions = versions(s);
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)
        .map_err(|e| format!("TLS versions: {e}"))?;
    let builder = match (&s.truststore, s.client_auth) {
        (Some(trust), auth) if auth != ClientAuth::None => {
            let verifier =
                WebPkiClientVerifier::builder_with_provider(Arc::new(roots(trust)?), provider);
            let verifier = if auth == ClientAuth::Requested {
                verifier.allow_unauthenticated()
            } else {
                verifier
            };
            builder.with_client_cert_verifier(
                verifier
                    .build()
                    .map_err(|e| format!("client certificate verifier: {e}"))?,
            )
        }
        _ => builder.with_no_client_auth(),
    };
    builder.with_single_cert(chain, key).map_err(|e| {
        format!(
            "the private key does not go with the certificate in {}: {e}",
            describe(&s.chain)
        )
    })
}
