//! `skein-operator local --tls`: a throwaway certificate authority, a
//! certificate per broker (its host as the subject alternative name, used
//! for both serving clients and replicating from the other brokers) and a
//! client certificate, written under `<data-dir>/tls/` with the client
//! settings a user needs. Made anew on every start, valid for a year
//! ([`LOCAL_VALIDITY_SECONDS`]): it is for trying TLS and mutual TLS on a
//! laptop, not for production.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};

/// The controller certificate's common name; brokers take sessions only
/// from a certificate with its subject.
pub(crate) const CONTROLLER_CN: &str = "skein-controller";

/// What was written.
pub struct LocalPki {
    pub dir: PathBuf,
    pub ca: PathBuf,
    /// Per broker id: one PEM file with the private key and the chain.
    pub broker_keystores: Vec<(i32, PathBuf)>,
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
    pub client_keystore: PathBuf,
    /// The controller's certificate (control-plane sessions).
    pub controller_keystore: PathBuf,
    /// confluent-kafka / librdkafka and Java client properties.
    pub librdkafka_properties: PathBuf,
    pub java_properties: PathBuf,
}

fn write_private(path: &Path, text: &str) -> anyhow::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    std::io::Write::write_all(&mut f, text.as_bytes())?;
    Ok(())
}

/// How long `local --tls` certificates are valid: a year from their start
/// (a broker that runs longer than that is restarted with new ones).
pub const LOCAL_VALIDITY_SECONDS: i64 = 365 * 86_400;

/// A certificate's validity: Unix seconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Validity {
    pub not_before: i64,
    pub not_after: i64,
}

impl Validity {
    /// From an hour ago (clocks differ a little) for `seconds`.
    pub fn from_now(seconds: i64) -> Validity {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        Validity {
            not_before: now - 3_600,
            not_after: now + seconds,
        }
    }

    fn apply(self, params: &mut CertificateParams) -> Result<(), rcgen::Error> {
        let at =
            |t: i64| time::OffsetDateTime::from_unix_timestamp(t).map_err(|_| rcgen::Error::Time);
        params.not_before = at(self.not_before)?;
        params.not_after = at(self.not_after)?;
        // A random serial: a renewed CA keeps its key, and rcgen's default
        // serial is derived from the key.
        let mut serial = [0u8; 16];
        ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut serial)
            .map_err(|_| rcgen::Error::RingUnspecified)?;
        serial[0] &= 0x7f;
        params.serial_number = Some(serial.to_vec().into());
        Ok(())
    }
}

/// An end-entity certificate for `cn` and `sans` signed by `issuer`, valid
/// for `validity` (rcgen's default, effectively forever, when `None`).
pub(crate) fn leaf_valid(
    cn: &str,
    sans: Vec<String>,
    issuer: &Issuer<'_, KeyPair>,
    validity: Option<Validity>,
) -> anyhow::Result<(String, String)> {
    let mut params = CertificateParams::new(sans)?;
    if let Some(v) = validity {
        v.apply(&mut params)?;
    }
    params.distinguished_name.push(DnType::CommonName, cn);
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![
        ExtendedKeyUsagePurpose::ServerAuth,
        ExtendedKeyUsagePurpose::ClientAuth,
    ];
    let key = KeyPair::generate()?;
    let cert = params.signed_by(&key, issuer)?;
    Ok((cert.pem(), key.serialize_pem()))
}

fn ca_params(cn: &str) -> Result<CertificateParams, rcgen::Error> {
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.distinguished_name.push(DnType::CommonName, cn);
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    Ok(ca_params)
}

/// A new self-signed certificate authority named `cn`, valid for `validity`.
fn new_ca(cn: &str, validity: Validity) -> Result<CertifiedIssuer<'static, KeyPair>, rcgen::Error> {
    let mut params = ca_params(cn)?;
    validity.apply(&mut params)?;
    CertifiedIssuer::self_signed(params, KeyPair::generate()?)
}

/// A self-signed certificate authority named `cn` with `key` (PEM; a new
/// key when `None`), valid for `validity`: its certificate and key as PEM.
/// The same name and key give a renewed certificate of the same CA: what
/// it signed before and after chains to either.
pub(crate) fn ca_valid(
    cn: &str,
    key: Option<&str>,
    validity: Validity,
) -> Result<(String, String), rcgen::Error> {
    let mut params = ca_params(cn)?;
    validity.apply(&mut params)?;
    let key = match key {
        Some(pem) => KeyPair::from_pem(pem)?,
        None => KeyPair::generate()?,
    };
    let ca = CertifiedIssuer::self_signed(params, key)?;
    Ok((ca.pem(), ca.key().serialize_pem()))
}

/// The issuer of a CA from its certificate and private key (PEM; any CA,
/// also one an administrator brings): what it signs chains to the
/// certificate (same subject, same key identifier).
pub(crate) fn ca_issuer(
    cert_pem: &str,
    key_pem: &str,
) -> Result<Issuer<'static, KeyPair>, rcgen::Error> {
    Issuer::from_ca_cert_pem(cert_pem, KeyPair::from_pem(key_pem)?)
}

/// Makes the CA and certificates for `brokers` (id, host) under `dir`.
pub fn make(dir: &Path, brokers: &[(i32, String)]) -> anyhow::Result<LocalPki> {
    std::fs::create_dir_all(dir)?;
    let validity = Validity::from_now(LOCAL_VALIDITY_SECONDS);
    let leaf = |cn: &str, sans: Vec<String>, ca: &Issuer<'_, KeyPair>| {
        leaf_valid(cn, sans, ca, Some(validity))
    };
    let ca = new_ca("skein local CA", validity)?;
    let ca_path = dir.join("ca.pem");
    std::fs::write(&ca_path, ca.pem())?;

    let mut broker_keystores = Vec::new();
    for (id, host) in brokers {
        let mut sans = vec![host.clone()];
        if host != "localhost" {
            sans.push("localhost".into());
        }
        let (cert, key) = leaf(&format!("skein-broker-{id}"), sans, &ca)?;
        let path = dir.join(format!("broker-{id}-keystore.pem"));
        write_private(&path, &format!("{key}{cert}"))?;
        broker_keystores.push((*id, path));
    }

    let (cert, key) = leaf(CONTROLLER_CN, Vec::new(), &ca)?;
    let controller_keystore = dir.join("controller-keystore.pem");
    write_private(&controller_keystore, &format!("{key}{cert}"))?;

    let (cert, key) = leaf("skein-client", Vec::new(), &ca)?;
    let client_cert = dir.join("client.pem");
    let client_key = dir.join("client.key");
    let client_keystore = dir.join("client-keystore.pem");
    std::fs::write(&client_cert, &cert)?;
    write_private(&client_key, &key)?;
    write_private(&client_keystore, &format!("{key}{cert}"))?;

    let librdkafka_properties = dir.join("client-librdkafka.properties");
    std::fs::write(
        &librdkafka_properties,
        format!(
            "security.protocol=ssl\nssl.ca.location={}\nssl.certificate.location={}\nssl.key.location={}\n",
            ca_path.display(),
            client_cert.display(),
            client_key.display()
        ),
    )?;
    let java_properties = dir.join("client.properties");
    std::fs::write(
        &java_properties,
        format!(
            "security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location={}\nssl.keystore.type=PEM\nssl.keystore.location={}\n",
            ca_path.display(),
            client_keystore.display()
        ),
    )?;
    Ok(LocalPki {
        dir: dir.to_path_buf(),
        ca: ca_path,
        broker_keystores,
        client_cert,
        client_key,
        client_keystore,
        controller_keystore,
        librdkafka_properties,
        java_properties,
    })
}

impl LocalPki {
    /// The broker configs that serve its Kafka port over TLS with client
    /// certificates required, and replicate over it.
    pub fn broker_overrides(&self, id: i32, kafka: &str) -> Vec<String> {
        let keystore = self
            .broker_keystores
            .iter()
            .find(|(b, _)| *b == id)
            .map(|(_, p)| p.display().to_string())
            .unwrap_or_default();
        vec![
            format!("listeners=SSL://{kafka}"),
            format!("advertised.listeners=SSL://{kafka}"),
            "listener.security.protocol.map=SSL:SSL".into(),
            "inter.broker.listener.name=SSL".into(),
            "ssl.keystore.type=PEM".into(),
            format!("ssl.keystore.location={keystore}"),
            "ssl.truststore.type=PEM".into(),
            format!("ssl.truststore.location={}", self.ca.display()),
            "ssl.client.auth=required".into(),
            format!("control.ssl.keystore.location={keystore}"),
            format!("control.ssl.truststore.location={}", self.ca.display()),
            format!("control.ssl.controller.subject=CN={CONTROLLER_CN}"),
        ]
    }

    /// The controller's end of the control plane.
    pub fn controller_files(&self) -> skein_controller::rpc::tls::ControlTlsFiles {
        skein_controller::rpc::tls::ControlTlsFiles {
            keystore: self.controller_keystore.clone(),
            truststore: self.ca.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_a_ca_broker_keystores_and_client_settings() {
        let d = tempfile::tempdir().unwrap();
        let pki = make(
            d.path(),
            &[(1, "127.0.0.1".into()), (2, "broker-2.local".into())],
        )
        .unwrap();
        let ks = std::fs::read_to_string(&pki.broker_keystores[0].1).unwrap();
        assert!(ks.contains("BEGIN PRIVATE KEY") && ks.contains("BEGIN CERTIFICATE"));
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&pki.client_key)
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o077, 0, "the client key is readable by others");
        let o = pki.broker_overrides(2, "broker-2.local:9093");
        assert!(o.contains(&"listeners=SSL://broker-2.local:9093".to_string()));
        assert!(o.iter().any(|l| l.ends_with("broker-2-keystore.pem")));
        let props = std::fs::read_to_string(&pki.librdkafka_properties).unwrap();
        assert!(props.contains("security.protocol=ssl"));
        // Every certificate expires a year from now, the CA too.
        let year_from_now = Validity::from_now(LOCAL_VALIDITY_SECONDS).not_after;
        for path in [
            &pki.ca,
            &pki.client_cert,
            &pki.broker_keystores[1].1,
            &pki.controller_keystore,
        ] {
            let pem = std::fs::read_to_string(path).unwrap();
            let not_after = crate::ca::not_after(&pem).unwrap();
            assert!(
                (year_from_now - not_after).abs() < 60,
                "{path:?} expires at {not_after}"
            );
        }
    }
}
