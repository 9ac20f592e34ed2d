//! How this broker connects to the others (a follower's fetches): over the
//! inter-broker listener's security protocol, as a Kafka broker does.
//!
//! - `SSL`: TLS with the listener's truststore, the broker's keystore as
//!   its client certificate (a leader whose listener asks for one sees the
//!   broker's certificate principal), and the leader's advertised host
//!   checked against its certificate unless
//!   `ssl.endpoint.identification.algorithm` is empty.
//! - `SASL_*`: `sasl.mechanism.inter.broker.protocol` (PLAIN, SCRAM-SHA-256
//!   or SCRAM-SHA-512) with the `username` and `password` of the listener's
//!   `listener.name.<l>.<mechanism>.sasl.jaas.config` entry.

use std::collections::BTreeMap;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, SignatureScheme};

use crate::listeners::{ListenerConfig, SaslMechanism, TlsSettings};
use crate::tls::{certificates, private_key, roots, versions, Reloading};
use skein_controller::broker_config as keys;

/// The client side of the inter-broker listener.
#[derive(Clone, Default)]
pub struct InterBrokerSecurity {
    pub tls: Option<Arc<Reloading<ClientConfig>>>,
    pub sasl: Option<SaslLogin>,
}

/// The broker's own SASL login.
#[derive(Clone)]
pub struct SaslLogin {
    pub mechanism: SaslMechanism,
    pub username: String,
    pub password: String,
}

impl std::fmt::Debug for InterBrokerSecurity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InterBrokerSecurity")
            .field("tls", &self.tls.is_some())
            .field(
                "sasl",
                &self.sasl.as_ref().map(|s| (s.mechanism, &s.username)),
            )
            .finish()
    }
}

/// A setting that makes the inter-broker client impossible: (key, reason).
pub type Invalid = (String, String);

impl InterBrokerSecurity {
    /// The client settings for `listener` (the inter-broker one).
    pub fn from_config(
        raw: &BTreeMap<String, String>,
        listener: &ListenerConfig,
    ) -> Result<Self, Invalid> {
        let name = &listener.name;
        let tls = match &listener.tls {
            Some(t) => Some(Arc::new(client_config(raw, name, t)?)),
            None => None,
        };
        let sasl = match &listener.sasl {
            Some(s) => Some(sasl_login(raw, name, &s.mechanisms)?),
            None => None,
        };
        Ok(InterBrokerSecurity { tls, sasl })
    }
}

fn sasl_login(
    raw: &BTreeMap<String, String>,
    listener: &str,
    enabled: &[SaslMechanism],
) -> Result<SaslLogin, Invalid> {
    let key = "sasl.mechanism.inter.broker.protocol";
    let value = raw.get(key).map(|s| s.trim()).unwrap_or("GSSAPI");
    let mechanism = SaslMechanism::parse(value).ok_or_else(|| {
        (
            key.to_string(),
            format!("{value} is not supported for replication (Kafka's default is GSSAPI); set PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"),
        )
    })?;
    if mechanism == SaslMechanism::OAuthBearer {
        return Err((
            key.to_string(),
            "OAUTHBEARER is not supported for replication; use PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512".into(),
        ));
    }
    if !enabled.contains(&mechanism) {
        return Err((
            key.to_string(),
            format!("{value} is not enabled on the inter-broker listener {listener} (sasl.enabled.mechanisms)"),
        ));
    }
    let jaas_key = format!(
        "listener.name.{}.{}.sasl.jaas.config",
        listener.to_ascii_lowercase(),
        mechanism.name().to_ascii_lowercase()
    );
    let Some(text) = raw.get(&jaas_key).filter(|v| !v.trim().is_empty()) else {
        return Err((
            jaas_key,
            "the broker's own login for replication is missing: a login module entry with username=\"…\" password=\"…\"".into(),
        ));
    };
    let entry = crate::jaas::parse(text).map_err(|e| (jaas_key.clone(), e))?;
    match (entry.options.get("username"), entry.options.get("password")) {
        (Some(u), Some(p)) if !u.is_empty() => Ok(SaslLogin {
            mechanism,
            username: u.clone(),
            password: p.clone(),
        }),
        _ => Err((
            jaas_key,
            "no username=\"…\" password=\"…\" options: the broker needs its own login for replication".into(),
        )),
    }
}

fn client_config(
    raw: &BTreeMap<String, String>,
    listener: &str,
    t: &TlsSettings,
) -> Result<Reloading<ClientConfig>, Invalid> {
    let key = |k: &str| {
        format!(
            "listener.name.{}.{k} (or {k})",
            listener.to_ascii_lowercase()
        )
    };
    if t.truststore.is_none() {
        return Err((
            key(keys::SSL_TRUSTSTORE_LOCATION.name),
            format!("the inter-broker listener {listener} is TLS: the brokers' certificates are checked against a truststore, and none is set"),
        ));
    }
    // Kafka's `ssl.endpoint.identification.algorithm`: `https` (the
    // default) checks the host name; an empty value does not.
    let algorithm = raw
        .get(&format!(
            "listener.name.{}.ssl.endpoint.identification.algorithm",
            listener.to_ascii_lowercase()
        ))
        .or_else(|| raw.get("ssl.endpoint.identification.algorithm"))
        .map(|s| s.trim().to_ascii_lowercase())
        .unwrap_or_else(|| "https".into());
    let build: fn(&TlsSettings) -> Result<ClientConfig, String> = match algorithm.as_str() {
        "https" => |t| build_client(t, true),
        "" => |t| build_client(t, false),
        other => {
            return Err((
                key("ssl.endpoint.identification.algorithm"),
                format!("'{other}' is not an algorithm (https, or empty for none)"),
            ))
        }
    };
    // Re-read when the files change, as the listener's own material is.
    Reloading::new(
        format!("inter-broker client of listener {listener}"),
        t.clone(),
        build,
    )
    .map_err(|e| (key(keys::SSL_KEYSTORE_LOCATION.name), e))
}

/// The client configuration: the truststore's CAs, the keystore as the
/// client certificate, the host name checked or not.
fn build_client(t: &TlsSettings, check_host: bool) -> Result<ClientConfig, String> {
    let roots = roots(t.truststore.as_ref().ok_or("no truststore")?)?;
    let chain = certificates(&t.chain, "keystore")?;
    let private = private_key(t)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let versions = versions(t);
    let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|e| e.to_string())?;
    let verifier: Arc<dyn ServerCertVerifier> = match check_host {
        true => webpki,
        false => Arc::new(AnyHostName(webpki)),
    };
    ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&versions)
        .map_err(|e| e.to_string())?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_client_auth_cert(chain, private)
        .map_err(|e| format!("the keystore's key and certificate: {e}"))
}

/// The CA chain and validity are checked; the name in the certificate is
/// not (`ssl.endpoint.identification.algorithm=`).
#[derive(Debug)]
struct AnyHostName(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for AnyHostName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn security(pairs: &[(&str, &str)]) -> Result<InterBrokerSecurity, Invalid> {
        let raw: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let (listeners, inter) = crate::listeners::parse(&raw).expect("listeners");
        let l = listeners.iter().find(|l| l.name == inter).unwrap();
        InterBrokerSecurity::from_config(&raw, l)
    }

    const SASL: &[(&str, &str)] = &[
        ("listeners", "SASL_PLAINTEXT://127.0.0.1:9092"),
        ("sasl.enabled.mechanisms", "PLAIN,SCRAM-SHA-256"),
        (
            "listener.name.sasl_plaintext.plain.sasl.jaas.config",
            r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="b" password="p" user_b="p";"#,
        ),
    ];

    #[test]
    fn a_sasl_listener_needs_the_mechanism_and_the_brokers_own_login() {
        // Kafka's default mechanism is GSSAPI: not served, so it must be named.
        let e = security(SASL).unwrap_err();
        assert_eq!(e.0, "sasl.mechanism.inter.broker.protocol");
        let mut ok = SASL.to_vec();
        ok.push(("sasl.mechanism.inter.broker.protocol", "PLAIN"));
        let s = security(&ok).unwrap();
        let login = s.sasl.unwrap();
        assert_eq!(
            (login.username.as_str(), login.password.as_str()),
            ("b", "p")
        );
        assert!(s.tls.is_none());
        // SCRAM-SHA-256 is enabled but has no login entry of its own.
        let mut scram = SASL.to_vec();
        scram.push(("sasl.mechanism.inter.broker.protocol", "SCRAM-SHA-256"));
        let e = security(&scram).unwrap_err();
        assert_eq!(
            e.0,
            "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config"
        );
        // A mechanism the listener does not enable.
        let mut off = SASL.to_vec();
        off.push(("sasl.mechanism.inter.broker.protocol", "SCRAM-SHA-512"));
        assert!(security(&off).unwrap_err().1.contains("not enabled"));
    }

    #[test]
    fn a_tls_listener_needs_a_truststore_and_a_known_identification_algorithm() {
        let base = [
            ("listeners", "SSL://127.0.0.1:9093"),
            ("ssl.keystore.location", "/nonexistent/keystore.pem"),
        ];
        let e = security(&base).unwrap_err();
        assert!(
            e.0.contains("ssl.truststore.location") && e.1.contains("truststore"),
            "{e:?}"
        );
        let mut unreadable = base.to_vec();
        unreadable.push(("ssl.truststore.location", "/nonexistent/ca.pem"));
        assert!(security(&unreadable).unwrap_err().1.contains("cannot read"));
    }

    #[test]
    fn plaintext_needs_nothing() {
        let s = security(&[("listeners", "PLAINTEXT://127.0.0.1:9092")]).unwrap();
        assert!(s.tls.is_none() && s.sasl.is_none());
    }
}
