//! The certificates of a cluster's control plane on Kubernetes, where the
//! control port is always on mutual TLS. Two Secrets owned by the
//! KafkaCluster hold them:
//!
//! - `<cluster>-control-ca`: the cluster's own certificate authority (its
//!   key too) and the controller's certificate. Only the operator reads it.
//! - `<cluster>-control-tls`: the brokers' key and certificate (subject
//!   `CN=skein-broker`, valid for every pod name under the headless
//!   Service) and the CA certificate. Mounted into the broker pods.
//!
//! Made on the first reconcile, read back after that (also by the next
//! operator after a failover) and renewed as they age ([`Lifetimes`]): a
//! leaf certificate when a third of its lifetime is left, the CA (same key,
//! so what it signed still chains to it) likewise. Nothing restarts: the
//! brokers re-read their mounted Secret when the kubelet updates it and
//! serve the new certificate to the next session; the controller takes its
//! new certificate for the next session it opens. A missing or unusable CA
//! makes everything anew.

use std::collections::{BTreeMap, BTreeSet};
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, Secret};
use k8s_openapi::ByteString;
use kube::api::ListParams;
use kube::{Api, Client, ResourceExt};
use skein_crds::KafkaCluster;

use crate::ca::{not_after, text};
use crate::error::ControllerStartError;
use crate::local_tls::{ca_issuer, ca_valid, leaf_valid, Validity, CONTROLLER_CN};
use crate::manifests::control_tls::{CA_KEY, KEYSTORE_KEY};
use crate::manifests::{owned_meta, selector_string, ClusterNames};

/// Keys of the CA Secret besides the CA certificate.
const CA_PRIVATE_KEY: &str = "ca.key";
const CONTROLLER_KEYSTORE_KEY: &str = "controller-keystore.pem";

const DAY: u64 = 86_400;
/// A certificate is renewed when this share of its lifetime (1/N) is left.
const RENEW_WHEN_LEFT_DIVISOR: i64 = 3;
/// How much longer than a new one a certificate may last before it is
/// issued again (operator replicas' clocks differ a little).
const LONGER_SLACK_SECONDS: i64 = 3600;
/// How far back a new certificate is valid from: clocks of brokers and
/// operator drift.
const BACKDATE_SECONDS: i64 = 3600;

/// How long the control plane's certificates live.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lifetimes {
    /// The CA's: ten years by default.
    pub ca: Duration,
    /// The brokers' and the controller's: 90 days by default; tests use
    /// seconds. It must leave the kubelet time to update the brokers'
    /// Secret within the last third.
    pub leaf: Duration,
}

impl Default for Lifetimes {
    fn default() -> Self {
        Lifetimes {
            ca: Duration::from_secs(3650 * DAY),
            leaf: Duration::from_secs(90 * DAY),
        }
    }
}

fn secs(d: Duration) -> i64 {
    i64::try_from(d.as_secs()).unwrap_or(i64::MAX)
}

/// Whether a certificate expiring at `not_after` has a third or less of
/// `lifetime` left at `now` (Unix seconds).
pub fn third_left(now: i64, not_after: i64, lifetime: Duration) -> bool {
    not_after - now <= secs(lifetime) / RENEW_WHEN_LEFT_DIVISOR
}

/// Whether a leaf certificate expiring at `not_after` is renewed at `now`
/// (Unix seconds) when leaves live `lifetime`: a third of it or less is
/// left, or more than a new one would get (issued under a longer lifetime,
/// or by a release whose certificates did not expire).
pub fn renewal_due(now: i64, not_after: i64, lifetime: Duration) -> bool {
    third_left(now, not_after, lifetime) || not_after - now > secs(lifetime) + LONGER_SLACK_SECONDS
}

/// When (Unix seconds) a certificate expiring at `not_after` falls due.
pub fn renewal_at(not_after: i64, lifetime: Duration) -> i64 {
    not_after - secs(lifetime) / RENEW_WHEN_LEFT_DIVISOR
}

/// The validity of a certificate issued at `now` for `lifetime`.
fn validity(now: i64, lifetime: Duration) -> Validity {
    Validity {
        not_before: now - BACKDATE_SECONDS,
        not_after: now.saturating_add(secs(lifetime)),
    }
}

/// The controller's TLS client settings for one cluster.
#[derive(Clone)]
pub struct ControlTls {
    /// Tells two generations of the certificates apart.
    pub fingerprint: u64,
    pub config: Arc<rustls::ClientConfig>,
    /// When (Unix seconds) one of the certificates falls due for renewal.
    pub renew_at: i64,
}

impl std::fmt::Debug for ControlTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ControlTls({:016x})", self.fingerprint)
    }
}

fn err(what: impl std::fmt::Display) -> ControllerStartError {
    ControllerStartError::ControlTls(what.to_string())
}

/// The material both Secrets hold, as PEM text.
#[derive(Clone, Debug, PartialEq)]
struct Material {
    ca_cert: String,
    ca_key: String,
    /// Key and certificate; empty when missing (then issued).
    controller_keystore: String,
    broker_keystore: String,
}

fn ca_name(names: &ClusterNames) -> String {
    format!("skein control plane {}/{}", names.namespace, names.cluster)
}

/// The names the brokers' certificate holds: every pod of the headless
/// Service.
fn broker_sans(names: &ClusterNames) -> Vec<String> {
    let domain = format!("{}.{}.svc", names.headless_service(), names.namespace);
    vec![format!("*.{domain}"), format!("*.{domain}.cluster.local")]
}

fn keystore(cn: &str, sans: Vec<String>, ca: &Material, v: Validity) -> Result<String, String> {
    let issuer = ca_issuer(&ca.ca_cert, &ca.ca_key).map_err(|e| e.to_string())?;
    let (cert, key) = leaf_valid(cn, sans, &issuer, Some(v)).map_err(|e| e.to_string())?;
    Ok(format!("{key}{cert}"))
}

impl Material {
    fn new(names: &ClusterNames, lifetimes: Lifetimes, now: i64) -> Result<Self, String> {
        let (ca_cert, ca_key) = ca_valid(&ca_name(names), None, validity(now, lifetimes.ca))
            .map_err(|e| e.to_string())?;
        let mut m = Material {
            ca_cert,
            ca_key,
            controller_keystore: String::new(),
            broker_keystore: String::new(),
        };
        m.renew_leaves(names, lifetimes, now)?;
        Ok(m)
    }

    /// What the Secrets hold: `None` without a CA. A brokers' Secret that
    /// carries another CA certificate counts as missing (its certificate
    /// is issued again).
    fn read(ca: Option<&Secret>, brokers: Option<&Secret>) -> Option<Self> {
        let ca = ca?;
        let ca_cert = text(ca, CA_KEY)?;
        let broker_keystore = brokers
            .filter(|b| text(b, CA_KEY).as_ref() == Some(&ca_cert))
            .and_then(|b| text(b, KEYSTORE_KEY))
            .unwrap_or_default();
        Some(Material {
            ca_key: text(ca, CA_PRIVATE_KEY)?,
            controller_keystore: text(ca, CONTROLLER_KEYSTORE_KEY).unwrap_or_default(),
            broker_keystore,
            ca_cert,
        })
    }

    /// Issues the leaf certificates that are missing, unreadable or due.
    /// The names of those issued.
    fn renew_leaves(
        &mut self,
        names: &ClusterNames,
        lifetimes: Lifetimes,
        now: i64,
    ) -> Result<Vec<&'static str>, String> {
        let due = |pem: &str| not_after(pem).is_none_or(|t| renewal_due(now, t, lifetimes.leaf));
        let v = validity(now, lifetimes.leaf);
        let mut issued = Vec::new();
        if due(&self.controller_keystore) {
            self.controller_keystore = keystore(CONTROLLER_CN, Vec::new(), self, v)?;
            issued.push("controller certificate");
        }
        if due(&self.broker_keystore) {
            self.broker_keystore = keystore("skein-broker", broker_sans(names), self, v)?;
            issued.push("brokers' certificate");
        }
        Ok(issued)
    }

    /// One step of the certificates' life at `now`: the CA renewed (same
    /// key) when a third of its lifetime is left, then the leaves as
    /// [`Self::renew_leaves`]. What changed.
    fn step(
        &mut self,
        names: &ClusterNames,
        lifetimes: Lifetimes,
        now: i64,
    ) -> Result<Vec<&'static str>, String> {
        let mut changed = Vec::new();
        if not_after(&self.ca_cert).is_none_or(|t| third_left(now, t, lifetimes.ca)) {
            self.ca_cert = ca_valid(
                &ca_name(names),
                Some(&self.ca_key),
                validity(now, lifetimes.ca),
            )
            .map_err(|e| e.to_string())?
            .0;
            changed.push("CA certificate");
        }
        changed.extend(self.renew_leaves(names, lifetimes, now)?);
        Ok(changed)
    }

    /// When the first of the certificates falls due.
    fn renew_at(&self, lifetimes: Lifetimes, now: i64) -> i64 {
        let at = |pem: &str, life: Duration| not_after(pem).map_or(now, |t| renewal_at(t, life));
        at(&self.ca_cert, lifetimes.ca)
            .min(at(&self.controller_keystore, lifetimes.leaf))
            .min(at(&self.broker_keystore, lifetimes.leaf))
    }

    /// The CA Secret and the brokers' Secret holding this material.
    fn secrets(&self, kc: &KafkaCluster, names: &ClusterNames) -> [Secret; 2] {
        [
            secret(
                kc,
                names,
                names.control_ca_secret(),
                &[
                    (CA_KEY, &self.ca_cert),
                    (CA_PRIVATE_KEY, &self.ca_key),
                    (CONTROLLER_KEYSTORE_KEY, &self.controller_keystore),
                ],
            ),
            secret(
                kc,
                names,
                names.control_tls_secret(),
                &[
                    (CA_KEY, &self.ca_cert),
                    (KEYSTORE_KEY, &self.broker_keystore),
                ],
            ),
        ]
    }

    fn client(&self, lifetimes: Lifetimes, now: i64) -> Result<ControlTls, String> {
        let config = skein_controller::rpc::tls::client_config_pem(
            self.controller_keystore.as_bytes(),
            self.ca_cert.as_bytes(),
        )?;
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (&self.ca_cert, &self.controller_keystore).hash(&mut h);
        Ok(ControlTls {
            fingerprint: h.finish(),
            config,
            renew_at: self.renew_at(lifetimes, now),
        })
    }
}

/// The material at `now`: `current` aged one step, or made anew when there
/// is none or it cannot be used. What changed (empty: nothing to write).
fn step(
    current: Option<Material>,
    names: &ClusterNames,
    lifetimes: Lifetimes,
    now: i64,
) -> Result<(Material, ControlTls, Vec<&'static str>), String> {
    if let Some(mut m) = current {
        let stepped = m
            .step(names, lifetimes, now)
            .and_then(|changed| Ok((m.client(lifetimes, now)?, changed)));
        match stepped {
            Ok((tls, changed)) => return Ok((m, tls, changed)),
            Err(e) => tracing::warn!(cluster = %names.cluster, namespace = %names.namespace,
                "control-plane certificates unusable ({e}); making new ones"),
        }
    }
    let m = Material::new(names, lifetimes, now)?;
    let tls = m.client(lifetimes, now)?;
    Ok((m, tls, vec!["CA and certificates made"]))
}

fn secret(kc: &KafkaCluster, names: &ClusterNames, name: String, data: &[(&str, &str)]) -> Secret {
    Secret {
        metadata: owned_meta(kc, names, name),
        type_: Some("Opaque".into()),
        data: Some(
            data.iter()
                .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
                .collect::<BTreeMap<_, _>>(),
        ),
        ..Secret::default()
    }
}

fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, secs)
}

/// The controller's client settings for `kc`'s control plane: the
/// Secrets made when missing, and renewed when due.
pub async fn ensure(
    client: &Client,
    kc: &KafkaCluster,
    lifetimes: Lifetimes,
) -> Result<ControlTls, ControllerStartError> {
    let names = ClusterNames::of(kc);
    let api: Api<Secret> = Api::namespaced(client.clone(), &names.namespace);
    let read = |name: String| {
        let api = api.clone();
        async move {
            api.get_opt(&name)
                .await
                .map_err(|e| err(format!("reading Secret {name}: {e}")))
        }
    };
    let ca = read(names.control_ca_secret()).await?;
    let brokers = read(names.control_tls_secret()).await?;
    // Secrets of these names that the cluster did not make are neither read
    // as its CA nor overwritten (crate::ownership).
    let uid = kc.uid();
    for (name, existing) in [
        (names.control_ca_secret(), &ca),
        (names.control_tls_secret(), &brokers),
    ] {
        crate::ownership::check(
            "Secret",
            &name,
            existing.as_ref().map(|s| &s.metadata),
            uid.as_deref(),
        )
        .map_err(err)?;
    }
    let current = Material::read(ca.as_ref(), brokers.as_ref());
    let (m, tls, changed) = step(current, &names, lifetimes, unix_now()).map_err(err)?;
    if !changed.is_empty() {
        for s in m.secrets(kc, &names) {
            let name = s.metadata.name.clone().unwrap_or_default();
            let existing = if name == names.control_ca_secret() {
                ca.as_ref()
            } else {
                brokers.as_ref()
            };
            match crate::ownership::write(&api, &s, existing, uid.as_deref()).await {
                Ok(crate::ownership::Written::Done(_)) => {}
                Ok(crate::ownership::Written::Foreign(f)) => return Err(err(f)),
                Err(e) => return Err(err(format!("writing Secret {name}: {e}"))),
            }
        }
        tracing::info!(cluster = %names.cluster, namespace = %names.namespace,
            "control-plane certificates: {} (Secrets {} and {})", changed.join(", "),
            names.control_ca_secret(), names.control_tls_secret());
    }
    Ok(tls)
}

/// Whether `pod` was made from a template without the brokers'
/// control-plane certificate: its broker serves the control port in
/// plaintext (a release before the control plane was always on mutual TLS,
/// for a cluster without `controlPlaneTls`).
pub fn serves_plaintext(pod: &Pod, names: &ClusterNames) -> bool {
    let secret = names.control_tls_secret();
    !pod.spec
        .iter()
        .flat_map(|s| s.volumes.iter().flatten())
        .filter_map(|v| v.secret.as_ref())
        .any(|s| s.secret_name.as_deref() == Some(secret.as_str()))
}

/// The brokers whose pods serve the control port in plaintext
/// ([`serves_plaintext`]) until the roll to the current template replaces
/// them; the controller talks to them so meanwhile. Decided by the pods'
/// specs in the API, never by what answers on the network, so nobody on
/// the network can talk the controller out of TLS.
pub async fn plaintext_brokers(
    client: &Client,
    names: &ClusterNames,
) -> Result<BTreeSet<i32>, ControllerStartError> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), &names.namespace);
    let prefix = format!("{}-", names.statefulset());
    Ok(pods
        .list(&ListParams::default().labels(&selector_string(names)))
        .await
        .map_err(|e| err(format!("listing broker pods: {e}")))?
        .items
        .iter()
        .filter(|p| serves_plaintext(p, names))
        .filter_map(|p| p.name_any().strip_prefix(&prefix)?.parse().ok())
        .collect())
}

/// Settings for a cluster `demo` in `ns`, made at `now` (tests).
#[cfg(test)]
pub(crate) fn test_tls(now: i64) -> ControlTls {
    let names = ClusterNames::of(&crate::manifests::test_cluster(serde_json::json!({})));
    step(None, &names, Lifetimes::default(), now).unwrap().1
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const T0: i64 = 1_800_000_000;

    fn cluster() -> KafkaCluster {
        crate::manifests::test_cluster(json!({}))
    }

    fn short() -> Lifetimes {
        Lifetimes {
            ca: Duration::from_secs(3000),
            leaf: Duration::from_secs(90),
        }
    }

    #[test]
    fn renewal_falls_due_with_a_third_left_or_when_a_certificate_outlives_the_policy() {
        let life = Duration::from_secs(90 * DAY);
        let day = DAY as i64;
        let issued = T0;
        let expires = issued + 90 * day;
        assert!(!renewal_due(issued, expires, life));
        assert!(!renewal_due(issued + 59 * day, expires, life));
        assert!(renewal_due(issued + 60 * day, expires, life));
        assert!(renewal_due(expires + 1, expires, life), "expired");
        assert_eq!(renewal_at(expires, life), issued + 60 * day);
        // A certificate of a release whose certificates did not expire, or
        // made before the lifetime was shortened.
        assert!(renewal_due(T0, 32_503_680_000, life));
        assert!(renewal_due(
            T0,
            T0 + 90 * day,
            Duration::from_secs(30 * DAY)
        ));
        // A clock a little behind the issuer's is no reason.
        assert!(!renewal_due(issued - 60, expires, life));
        assert!(third_left(T0, T0 + 10, Duration::from_secs(30)));
        assert!(!third_left(T0, T0 + 11, Duration::from_secs(30)));
    }

    #[test]
    fn new_certificates_get_their_lifetimes_and_chain_to_the_ca() {
        let kc = cluster();
        let names = ClusterNames::of(&kc);
        let lifetimes = Lifetimes::default();
        let (m, tls, changed) = step(None, &names, lifetimes, T0).unwrap();
        assert_eq!(changed, vec!["CA and certificates made"]);
        assert_eq!(not_after(&m.ca_cert), Some(T0 + 3650 * DAY as i64));
        for ks in [&m.controller_keystore, &m.broker_keystore] {
            assert_eq!(not_after(ks), Some(T0 + 90 * DAY as i64));
        }
        assert_eq!(tls.renew_at, T0 + 60 * DAY as i64);
        // The brokers' certificate names every pod, the controller's is the
        // subject brokers take sessions from.
        let subject = |pem: &str| {
            let from = pem.find("-----BEGIN CERTIFICATE-----").unwrap();
            let (_, p) = x509_parser::pem::parse_x509_pem(&pem.as_bytes()[from..]).unwrap();
            let c = p.parse_x509().unwrap();
            let sans = c
                .subject_alternative_name()
                .ok()
                .flatten()
                .map(|s| format!("{:?}", s.value.general_names))
                .unwrap_or_default();
            (c.subject().to_string(), c.issuer().to_string(), sans)
        };
        let (s, issuer, _) = subject(&m.controller_keystore);
        assert_eq!(s, "CN=skein-controller");
        assert_eq!(issuer, "CN=skein control plane ns/demo");
        let (s, _, sans) = subject(&m.broker_keystore);
        assert_eq!(s, "CN=skein-broker");
        assert!(sans.contains("*.demo-brokers.ns.svc"), "{sans}");
    }

    #[test]
    fn leaves_are_renewed_when_due_and_the_ca_keeps_its_key() {
        let kc = cluster();
        let names = ClusterNames::of(&kc);
        let l = short();
        let (first, tls, _) = step(None, &names, l, T0).unwrap();
        let [ca_secret, brokers_secret] = first.secrets(&kc, &names);
        let read = |ca: &Secret, b: &Secret| Material::read(Some(ca), Some(b));

        // Too early: nothing changes, nothing is written.
        let (same, same_tls, changed) =
            step(read(&ca_secret, &brokers_secret), &names, l, T0 + 59).unwrap();
        assert!(changed.is_empty(), "{changed:?}");
        assert_eq!(same, first);
        assert_eq!(same_tls.fingerprint, tls.fingerprint);
        assert_eq!(tls.renew_at, T0 + 60);

        // A third left: both leaves are issued again, the CA stays; the
        // Secrets are rewritten with the new certificates.
        let (renewed, renewed_tls, changed) =
            step(read(&ca_secret, &brokers_secret), &names, l, T0 + 60).unwrap();
        assert_eq!(
            changed,
            vec!["controller certificate", "brokers' certificate"]
        );
        assert_eq!(renewed.ca_cert, first.ca_cert);
        assert_ne!(renewed.broker_keystore, first.broker_keystore);
        assert_eq!(not_after(&renewed.broker_keystore), Some(T0 + 150));
        assert_ne!(renewed_tls.fingerprint, tls.fingerprint);
        assert_eq!(renewed_tls.renew_at, T0 + 120);
        let [ca2, brokers2] = renewed.secrets(&kc, &names);
        let data = |s: &Secret, k: &str| s.data.as_ref().unwrap()[k].0.clone();
        assert_ne!(
            data(&brokers2, KEYSTORE_KEY),
            data(&brokers_secret, KEYSTORE_KEY)
        );
        assert_ne!(
            data(&ca2, CONTROLLER_KEYSTORE_KEY),
            data(&ca_secret, CONTROLLER_KEYSTORE_KEY)
        );
        assert_eq!(read(&ca2, &brokers2), Some(renewed.clone()));

        // The CA with a third left: a new certificate, the same key.
        let (aged, _, changed) = step(Some(renewed.clone()), &names, l, T0 + 2000).unwrap();
        assert_eq!(changed[0], "CA certificate");
        assert_eq!(aged.ca_key, first.ca_key);
        assert_ne!(aged.ca_cert, first.ca_cert);
        assert_eq!(not_after(&aged.ca_cert), Some(T0 + 5000));
    }

    /// A mutual TLS handshake in memory between a broker (its keystore,
    /// trusting `broker_trust`) and the controller, dialling a pod's name.
    fn handshake(
        broker: &str,
        broker_trust: &str,
        controller: &str,
        controller_trust: &str,
    ) -> Result<(), String> {
        let dir = tempfile::tempdir().unwrap();
        let files = skein_controller::rpc::tls::ControlTlsFiles {
            keystore: dir.path().join("broker.pem"),
            truststore: dir.path().join("ca.crt"),
        };
        std::fs::write(&files.keystore, broker).unwrap();
        std::fs::write(&files.truststore, broker_trust).unwrap();
        let server = skein_controller::rpc::tls::server_config(&files)?;
        let client = skein_controller::rpc::tls::client_config_pem(
            controller.as_bytes(),
            controller_trust.as_bytes(),
        )?;
        let name = rustls::pki_types::ServerName::try_from("demo-0.demo-brokers.ns.svc").unwrap();
        let mut c = rustls::ClientConnection::new(client, name).map_err(|e| e.to_string())?;
        let mut s = rustls::ServerConnection::new(server).map_err(|e| e.to_string())?;
        fn pass(
            from: &mut impl std::ops::DerefMut<Target = rustls::ConnectionCommon<impl Sized>>,
            to: &mut impl std::ops::DerefMut<Target = rustls::ConnectionCommon<impl Sized>>,
        ) -> Result<(), String> {
            let mut buf = Vec::new();
            while from.wants_write() {
                from.write_tls(&mut buf).unwrap();
            }
            let mut rest = buf.as_slice();
            while !rest.is_empty() {
                to.read_tls(&mut rest).unwrap();
                to.process_new_packets().map_err(|e| e.to_string())?;
            }
            Ok(())
        }
        for _ in 0..10 {
            pass(&mut c, &mut s)?;
            pass(&mut s, &mut c)?;
            if !c.is_handshaking() && !s.is_handshaking() {
                // The server's verdict on the client's certificate comes last.
                return pass(&mut c, &mut s);
            }
        }
        Err("the handshake did not finish".into())
    }

    /// The certificates serve a real handshake, also when one end trusts
    /// the renewed CA certificate and the other end's certificate was
    /// signed before the renewal; another cluster's controller is refused.
    #[test]
    fn the_certificates_shake_hands_across_a_ca_renewal() {
        let names = ClusterNames::of(&cluster());
        let l = Lifetimes {
            ca: Duration::from_secs(3000),
            leaf: Duration::from_secs(90 * DAY),
        };
        let now = unix_now();
        let (m, _, _) = step(None, &names, l, now).unwrap();
        handshake(
            &m.broker_keystore,
            &m.ca_cert,
            &m.controller_keystore,
            &m.ca_cert,
        )
        .unwrap();
        let mut renewed = m.clone();
        assert_eq!(
            renewed.step(&names, l, now + 2000).unwrap(),
            vec!["CA certificate"]
        );
        handshake(
            &m.broker_keystore,
            &renewed.ca_cert,
            &m.controller_keystore,
            &m.ca_cert,
        )
        .unwrap();
        handshake(
            &m.broker_keystore,
            &m.ca_cert,
            &m.controller_keystore,
            &renewed.ca_cert,
        )
        .unwrap();
        let (other, _, _) = step(None, &names, l, now).unwrap();
        let e = handshake(
            &m.broker_keystore,
            &m.ca_cert,
            &other.controller_keystore,
            &m.ca_cert,
        )
        .unwrap_err();
        // Both clusters' CAs have the same name: the signature tells them apart.
        assert!(e.contains("BadSignature"), "{e}");
        assert!(handshake(
            &m.broker_keystore,
            &m.ca_cert,
            &m.controller_keystore,
            &other.ca_cert
        )
        .is_err());
    }

    #[test]
    fn the_secrets_read_back_and_a_foreign_brokers_secret_is_issued_again() {
        let kc = cluster();
        let names = ClusterNames::of(&kc);
        let l = Lifetimes::default();
        let (m, _, _) = step(None, &names, l, T0).unwrap();
        let [ca, brokers] = m.secrets(&kc, &names);
        assert_eq!(ca.metadata.name.as_deref(), Some("demo-control-ca"));
        assert_eq!(brokers.metadata.name.as_deref(), Some("demo-control-tls"));
        assert_eq!(Material::read(Some(&ca), Some(&brokers)), Some(m.clone()));
        assert!(!m.broker_keystore.contains(&m.ca_key));
        // The brokers' Secret holds no CA key and no controller key.
        let broker_data = brokers.data.clone().unwrap();
        assert_eq!(
            broker_data.keys().collect::<Vec<_>>(),
            vec![KEYSTORE_KEY, CA_KEY]
        );
        // A brokers' Secret from another CA: its certificate is issued
        // again from this cluster's CA, which stays.
        let (other, _, _) = step(None, &names, l, T0).unwrap();
        let [_, foreign] = other.secrets(&kc, &names);
        let (fixed, _, changed) =
            step(Material::read(Some(&ca), Some(&foreign)), &names, l, T0).unwrap();
        assert_eq!(changed, vec!["brokers' certificate"]);
        assert_eq!(fixed.ca_cert, m.ca_cert);
        assert_eq!(fixed.controller_keystore, m.controller_keystore);
        // No CA at all: everything anew.
        assert!(Material::read(None, Some(&brokers)).is_none());
        let (_, _, changed) = step(None, &names, l, T0).unwrap();
        assert_eq!(changed, vec!["CA and certificates made"]);
    }

    #[test]
    fn pods_without_the_control_plane_secret_serve_plaintext() {
        let names = ClusterNames::of(&cluster());
        let pod = |volumes: serde_json::Value| -> Pod {
            serde_json::from_value(json!({"metadata": {"name": "demo-0"},
                "spec": {"containers": [], "volumes": volumes}}))
            .unwrap()
        };
        assert!(serves_plaintext(
            &pod(json!([{"name": "config", "configMap": {"name": "demo-config"}}])),
            &names
        ));
        assert!(!serves_plaintext(
            &pod(json!([{"name": "control-tls", "secret": {"secretName": "demo-control-tls"}}])),
            &names
        ));
    }
}
