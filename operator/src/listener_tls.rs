//! Certificates of the client listeners (`spec.listeners.clients[].tls`),
//! made by the operator and kept in Secrets owned by the KafkaCluster:
//!
//! - `<cluster>-cluster-ca`: the cluster CA's certificate and key (only the
//!   operator reads it);
//! - `<cluster>-cluster-ca-cert`: the cluster CA's certificate, for clients
//!   (a Secret, and a ConfigMap of the same name);
//! - `<cluster>-clients-ca`: the CA of client certificates (listeners with
//!   `authentication.type: tls` trust it), certificate and key;
//! - `<cluster>-listener-tls`: the brokers' key and certificate, valid for
//!   every name and address clients use (pod DNS names, the bootstrap
//!   Service's names, the addresses of the nodes the brokers run on, for
//!   `nodeport` listeners), and both CA certificates. Mounted into the
//!   broker pods; the brokers reload it when it changes.
//!
//! Each is written only while it is absent or owned by the KafkaCluster
//! ([`crate::ownership`]): a Secret of that name made by anything else — a
//! KafkaUser, an application — is neither read as a CA nor overwritten; the
//! cluster is refused with `SecretOwnedByAnother` instead.
//!
//! The CAs are made once and read back after that (also by the next operator
//! after a failover), renewed and replaced as [`crate::ca`] describes, or
//! brought by the administrator (`spec.certificates.clusterCaSecret`,
//! `clientsCaSecret`: read, never written). What trusts a CA gets its
//! bundle (two certificates during a replacement). The brokers'
//! certificate is issued again when it lacks a name it must hold (a broker
//! pod lands on another node: the subject alternative names it was issued
//! for are recorded in an annotation on its Secret), when the CAs' bundles
//! change, or when it is due for renewal.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::ByteString;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client, ResourceExt};
use skein_crds::{AuthenticationType, CertificateAuthorityStatus, KafkaCluster};

use crate::ca::{self, text, Ca, CaState, Policy, Request, Timing};
use crate::error::{Error, Result};
use crate::local_tls::{ca_issuer, leaf_valid};
use crate::manifests::listeners::{BROKER_CN, CA_KEY, CLIENTS_CA_KEY, KEYSTORE_KEY};
use crate::manifests::{owned_meta, ClusterNames};
use crate::ownership::{self, Written};
use crate::validate::InvalidSpec;

/// How often a CA brought in `spec.certificates` is read again.
const BROUGHT_CA_RECHECK: Duration = Duration::from_secs(30);

/// Annotation on the brokers' Secret: the names its certificate holds.
const SANS_ANNOTATION: &str = "skein.dev/subject-alternative-names";

fn err(what: impl std::fmt::Display) -> Error {
    Error::Certificates(what.to_string())
}

async fn read(secrets: &Api<Secret>, name: &str) -> Result<Option<Secret>> {
    secrets
        .get_opt(name)
        .await
        .map_err(|e| err(format!("reading Secret {name}: {e}")))
}

fn cluster_ca_name(names: &ClusterNames) -> String {
    format!("skein cluster CA {}/{}", names.namespace, names.cluster)
}

fn clients_ca_name(names: &ClusterNames) -> String {
    format!("skein clients CA {}/{}", names.namespace, names.cluster)
}

/// How `kc`'s certificates are issued, at `now`, timed by `timing`.
pub fn policy(kc: &KafkaCluster, timing: Timing) -> Policy {
    let c = &kc.spec.certificates;
    Policy {
        validity_days: c.validity_days.into(),
        renewal_days: c.renewal_days.into(),
        day: timing.day.as_secs().max(1) as i64,
        phase: timing.phase,
        now: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or_default(),
    }
}

/// The names the brokers' certificate must hold: every pod's DNS name (by
/// wildcard), the bootstrap Service's names, and `node_addresses`.
pub fn subject_alt_names(names: &ClusterNames, node_addresses: &[String]) -> Vec<String> {
    let domain = format!("{}.{}.svc", names.headless_service(), names.namespace);
    let bootstrap = names.bootstrap_service();
    let ns = &names.namespace;
    let mut sans = vec![
        format!("*.{domain}"),
        format!("*.{domain}.cluster.local"),
        bootstrap.clone(),
        format!("{bootstrap}.{ns}"),
        format!("{bootstrap}.{ns}.svc"),
        format!("{bootstrap}.{ns}.svc.cluster.local"),
    ];
    let mut addresses = node_addresses.to_vec();
    addresses.sort();
    addresses.dedup();
    sans.extend(addresses);
    sans
}

fn secret(
    kc: &KafkaCluster,
    names: &ClusterNames,
    name: String,
    data: &[(&str, &str)],
    annotations: Option<BTreeMap<String, String>>,
) -> Secret {
    let mut metadata = owned_meta(kc, names, name);
    metadata.annotations = annotations;
    Secret {
        metadata,
        type_: Some("Opaque".into()),
        data: Some(
            data.iter()
                .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
                .collect(),
        ),
        ..Secret::default()
    }
}

/// The brokers' Secret for `sans`, signed by the cluster CA, trusting the
/// clients CA's bundle.
fn brokers_secret(
    kc: &KafkaCluster,
    names: &ClusterNames,
    cluster_ca: &CaState,
    clients_ca: &CaState,
    sans: &[String],
    policy: &Policy,
) -> Result<Secret> {
    let issuer = ca_issuer(&cluster_ca.signer.cert, &cluster_ca.signer.key).map_err(err)?;
    let (cert, key) =
        leaf_valid(BROKER_CN, sans.to_vec(), &issuer, Some(policy.validity())).map_err(err)?;
    Ok(secret(
        kc,
        names,
        names.listener_tls_secret(),
        &[
            (KEYSTORE_KEY, &format!("{key}{cert}")),
            (CA_KEY, &cluster_ca.bundle()),
            (CLIENTS_CA_KEY, &clients_ca.bundle()),
        ],
        Some(BTreeMap::from([(
            SANS_ANNOTATION.to_string(),
            sans.join(","),
        )])),
    ))
}

/// Whether `current` (the brokers' Secret as it is) still fits: issued by
/// these CAs for at least `sans`, not due for renewal. A name it holds
/// beyond them (a node no broker runs on for the moment, e.g. while a pod
/// is being recreated) is no reason to issue it again: the brokers would
/// reload for nothing.
fn brokers_secret_fits(
    current: &Secret,
    cluster_ca: &CaState,
    clients_ca: &CaState,
    sans: &[String],
    policy: &Policy,
) -> bool {
    let issued_for: Vec<&str> = current
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(SANS_ANNOTATION))
        .map(|s| s.split(',').collect())
        .unwrap_or_default();
    sans.iter().all(|n| issued_for.contains(&n.as_str()))
        && text(current, CA_KEY) == Some(cluster_ca.bundle())
        && text(current, CLIENTS_CA_KEY) == Some(clients_ca.bundle())
        && text(current, KEYSTORE_KEY).is_some_and(|k| !policy.due(&k))
}

/// One of the cluster's two CAs.
struct CaSlot<'a> {
    /// `cluster` or `clients` (as the force annotations name it).
    which: &'static str,
    cn: String,
    secret_name: String,
    brought: Option<&'a String>,
}

fn slots<'a>(kc: &'a KafkaCluster, names: &ClusterNames) -> [CaSlot<'a>; 2] {
    let c = &kc.spec.certificates;
    [
        CaSlot {
            which: "cluster",
            cn: cluster_ca_name(names),
            secret_name: names.cluster_ca_secret(),
            brought: c.cluster_ca_secret.as_ref(),
        },
        CaSlot {
            which: "clients",
            cn: clients_ca_name(names),
            secret_name: names.clients_ca_secret(),
            brought: c.clients_ca_secret.as_ref(),
        },
    ]
}

/// A CA an administrator brings, read from its Secret.
async fn brought_ca(secrets: &Api<Secret>, name: &str) -> Result<CaState> {
    read(secrets, name)
        .await?
        .as_ref()
        .and_then(Ca::brought)
        .map(CaState::brought)
        .ok_or_else(|| {
            err(format!(
                "Secret {name} (spec.certificates) is missing or holds no ca.crt and ca.key (or tls.crt and tls.key)"
            ))
        })
}

/// What [`ensure`] found and leaves to do.
#[derive(Debug, Default)]
pub struct Outcome {
    /// When to look again: a CA phase ends, or a CA or the brokers'
    /// certificate falls due for renewal.
    pub requeue: Option<Duration>,
    /// For `status.certificateAuthorities`.
    pub statuses: Vec<CertificateAuthorityStatus>,
}

impl Outcome {
    fn sooner(&mut self, after: Duration) {
        self.requeue = Some(self.requeue.map_or(after, |r| r.min(after)));
    }
}

fn ca_status(
    which: &str,
    secret: &str,
    state: &CaState,
    brought: bool,
) -> CertificateAuthorityStatus {
    CertificateAuthorityStatus {
        name: which.to_string(),
        secret: secret.to_string(),
        phase: match (brought, state.phase()) {
            (true, _) => "Brought",
            (false, ca::Phase::Steady) => "Steady",
            (false, ca::Phase::Trust) => "TrustingNew",
            (false, ca::Phase::Replace) => "ReplacingCertificates",
        }
        .to_string(),
        not_after: ca::not_after(&state.signer.cert)
            .and_then(|t| k8s_openapi::jiff::Timestamp::from_second(t).ok())
            .map(|t| t.to_string()),
    }
}

/// Writes `obj` for `kc` unless `existing` is someone else's
/// ([`ownership::write`]); `Ok(Err(_))` is that refusal.
async fn write_owned<K>(
    api: &Api<K>,
    kc: &KafkaCluster,
    obj: K,
    existing: Option<&K>,
) -> Result<std::result::Result<(), InvalidSpec>>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Default
        + Clone
        + serde::Serialize
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let name = obj.meta().name.clone().unwrap_or_default();
    match ownership::write(api, &obj, existing, kc.uid().as_deref()).await {
        Ok(Written::Done(_)) => Ok(Ok(())),
        Ok(Written::Foreign(f)) => Ok(Err(InvalidSpec::SecretOwnedByAnother(f))),
        Err(e) => Err(err(format!("writing {} {name}: {e}", K::kind(&())))),
    }
}

/// Refuses a CA Secret someone else owns before it is read as a CA.
fn ours(
    kc: &KafkaCluster,
    name: &str,
    existing: Option<&Secret>,
) -> std::result::Result<(), InvalidSpec> {
    ownership::check(
        "Secret",
        name,
        existing.map(|s| &s.metadata),
        kc.uid().as_deref(),
    )
    .map_err(InvalidSpec::SecretOwnedByAnother)
}

/// Makes, renews or rolls over the listener certificates of `kc` (nothing
/// when no client listener serves TLS). `node_addresses`: where the
/// brokers run; `timing`: the shortest phase of a CA replacement and the
/// length of a day.
/// `Ok(Err(_))`: refused, nothing written from there on — a Secret the
/// cluster would write is someone else's, or the cluster CA and the clients
/// CA are one.
pub async fn ensure(
    client: &Client,
    kc: &KafkaCluster,
    node_addresses: &[String],
    timing: Timing,
) -> Result<std::result::Result<Outcome, InvalidSpec>> {
    if !crate::manifests::listeners::any_tls(kc) {
        return Ok(Ok(Outcome::default()));
    }
    let names = ClusterNames::of(kc);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &names.namespace);
    macro_rules! refused {
        ($e:expr) => {
            if let Err(refusal) = $e {
                return Ok(Err(refusal));
            }
        };
    }
    let policy = policy(kc, timing);
    let annotations = kc.annotations();
    let mut outcome = Outcome::default();
    let mut done: Vec<(&str, &str)> = Vec::new();
    let mut cas = Vec::new();
    for slot in slots(kc, &names) {
        if let Some(name) = slot.brought {
            let state = brought_ca(&secrets, name).await?;
            // The operator may not watch Secrets (get, create and patch
            // only): it reads a brought CA again this often, so that a CA
            // its administrator (or cert-manager) renews reaches the brokers
            // and the users' certificates within about a minute.
            outcome.sooner(BROUGHT_CA_RECHECK);
            outcome
                .statuses
                .push(ca_status(slot.which, name, &state, true));
            cas.push(state);
            continue;
        }
        let request = Request {
            renew: ca::named_in(annotations.get(ca::FORCE_RENEW_ANNOTATION), slot.which),
            replace: ca::named_in(annotations.get(ca::FORCE_REPLACE_ANNOTATION), slot.which),
        };
        let existing = read(&secrets, &slot.secret_name).await?;
        refused!(ours(kc, &slot.secret_name, existing.as_ref()));
        let (mut state, made) = match existing.as_ref().and_then(CaState::read) {
            Some(state) => (state, false),
            None => (CaState::new(&slot.cn, &policy).map_err(err)?, true),
        };
        // The old clients CA is dropped only once every `tls` user holds a
        // certificate of the new one.
        if slot.which == "clients"
            && state.phase() == ca::Phase::Replace
            && state.phase_left(&policy).is_some_and(|d| d.is_zero())
        {
            let waiting = users_on_old_ca(client, kc, &state.signer.cert).await?;
            if !waiting.is_empty() {
                tracing::info!(cluster = %names.cluster, users = ?waiting,
                    "keeping the old clients CA: these users' certificates are not reissued yet");
                outcome.sooner(Duration::from_secs(5));
                outcome
                    .statuses
                    .push(ca_status(slot.which, &slot.secret_name, &state, false));
                cas.push(state);
                continue;
            }
        }
        let (step, acted) = state.step(&slot.cn, request, &policy).map_err(err)?;
        if made || step.is_some() {
            let (data, annotations) = state.secret_parts();
            let data: Vec<(&str, &str)> = data.iter().map(|(k, v)| (*k, v.as_str())).collect();
            let s = secret(
                kc,
                &names,
                slot.secret_name.clone(),
                &data,
                Some(annotations),
            );
            refused!(write_owned(&secrets, kc, s, existing.as_ref()).await?);
            tracing::info!(cluster = %names.cluster, namespace = %names.namespace,
                ca = slot.which, step = ?step.filter(|_| !made).unwrap_or(ca::Step::Made),
                "certificate authority written (Secret {})", slot.secret_name);
        }
        // A replacement also answers a renewal asked for with it.
        if acted {
            done.push((ca::FORCE_RENEW_ANNOTATION, slot.which));
            if request.replace {
                done.push((ca::FORCE_REPLACE_ANNOTATION, slot.which));
            }
        }
        // Back when the phase may end, or when the CA falls due for renewal.
        let next = state
            .phase_left(&policy)
            .unwrap_or_else(|| policy.renewal_in(&state.signer.cert));
        outcome.sooner(next + Duration::from_secs(1));
        outcome
            .statuses
            .push(ca_status(slot.which, &slot.secret_name, &state, false));
        cas.push(state);
    }
    let [cluster_ca, clients_ca] = <[CaState; 2]>::try_from(cas).expect("two CAs");
    refused!(distinct(&cluster_ca, &clients_ca));
    if !done.is_empty() {
        clear_requests(client, kc, &done).await?;
    }

    // What clients need to trust the brokers: a Secret and a ConfigMap.
    let bundle = cluster_ca.bundle();
    let current = read(&secrets, &names.cluster_ca_cert()).await?;
    let s = secret(
        kc,
        &names,
        names.cluster_ca_cert(),
        &[(CA_KEY, &bundle)],
        None,
    );
    refused!(write_owned(&secrets, kc, s, current.as_ref()).await?);
    let cm = ConfigMap {
        metadata: owned_meta(kc, &names, names.cluster_ca_cert()),
        data: Some(BTreeMap::from([(CA_KEY.to_string(), bundle)])),
        ..ConfigMap::default()
    };
    let config_maps = Api::<ConfigMap>::namespaced(client.clone(), &names.namespace);
    let current = config_maps
        .get_opt(&names.cluster_ca_cert())
        .await
        .map_err(|e| {
            err(format!(
                "reading ConfigMap {}: {e}",
                names.cluster_ca_cert()
            ))
        })?;
    refused!(write_owned(&config_maps, kc, cm, current.as_ref()).await?);

    let sans = subject_alt_names(&names, node_addresses);
    let current = read(&secrets, &names.listener_tls_secret()).await?;
    refused!(ours(kc, &names.listener_tls_secret(), current.as_ref()));
    if !current
        .as_ref()
        .is_some_and(|c| brokers_secret_fits(c, &cluster_ca, &clients_ca, &sans, &policy))
    {
        let s = brokers_secret(kc, &names, &cluster_ca, &clients_ca, &sans, &policy)?;
        let renewal_in = text(&s, KEYSTORE_KEY).map(|k| policy.renewal_in(&k));
        refused!(write_owned(&secrets, kc, s, current.as_ref()).await?);
        tracing::info!(cluster = %names.cluster, namespace = %names.namespace,
            names = %sans.join(","),
            "listener certificate issued (Secret {})", names.listener_tls_secret());
        outcome.sooner(renewal_in.unwrap_or_default() + Duration::from_secs(1));
    } else if let Some(k) = current.as_ref().and_then(|c| text(c, KEYSTORE_KEY)) {
        outcome.sooner(policy.renewal_in(&k) + Duration::from_secs(1));
    }
    Ok(Ok(outcome))
}

/// The cluster CA and the clients CA must be two keys: were they one, a
/// `tls` user's certificate would verify as the cluster CA's, where only
/// the brokers' may (the replication listener). Two Secrets brought with
/// the same key are the case this catches; the operator's own CAs have
/// keys of their own.
fn distinct(cluster_ca: &CaState, clients_ca: &CaState) -> std::result::Result<(), InvalidSpec> {
    if ca::same_key(&cluster_ca.signer.cert, &clients_ca.signer.cert) {
        return Err(InvalidSpec::SameCertificateAuthority {
            why: "the cluster CA and the clients CA hold the same key (spec.certificates)".into(),
        });
    }
    Ok(())
}

/// The `tls` KafkaUsers of `kc` whose Secret holds no certificate of the
/// clients CA `signer` yet. A user refused for its name, or whose Secret is
/// someone else's, holds no certificate at all and is not waited for.
async fn users_on_old_ca(client: &Client, kc: &KafkaCluster, signer: &str) -> Result<Vec<String>> {
    let ns = kc.namespace().unwrap_or_default();
    let users = Api::<skein_crds::KafkaUser>::namespaced(client.clone(), &ns)
        .list(&Default::default())
        .await
        .map_err(|e| err(format!("listing KafkaUsers: {e}")))?;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let print = fingerprint(signer);
    let mut waiting = Vec::new();
    for u in users.items.iter().filter(|u| {
        u.spec.cluster_ref.name == kc.name_any()
            && u.spec.authentication.as_ref().map(|a| a.type_) == Some(AuthenticationType::Tls)
            && u.metadata.deletion_timestamp.is_none()
            && crate::validate::validate_user(u).is_ok()
    }) {
        let s = read(&secrets, &u.name_any()).await?;
        let theirs = ownership::check(
            "Secret",
            &u.name_any(),
            s.as_ref().map(|s| &s.metadata),
            u.uid().as_deref(),
        );
        if theirs.is_err() {
            continue;
        }
        let on = s
            .as_ref()
            .and_then(|s| s.metadata.annotations.as_ref())
            .and_then(|a| a.get(USER_CA_ANNOTATION));
        if on != Some(&print) {
            waiting.push(u.name_any());
        }
    }
    Ok(waiting)
}

/// Takes the CAs in `done` (annotation, CA) off the force annotations of
/// `kc`: the request was acted on.
async fn clear_requests(client: &Client, kc: &KafkaCluster, done: &[(&str, &str)]) -> Result<()> {
    let annotations = kc.annotations();
    let mut patch = serde_json::Map::new();
    for a in [ca::FORCE_RENEW_ANNOTATION, ca::FORCE_REPLACE_ANNOTATION] {
        let Some(value) = annotations.get(a) else {
            continue;
        };
        let left: Vec<&str> = value
            .split(',')
            .map(str::trim)
            .filter(|w| !w.is_empty() && !done.contains(&(a, w)))
            .collect();
        if left.len() != value.split(',').filter(|w| !w.trim().is_empty()).count() {
            let v = if left.is_empty() {
                serde_json::Value::Null
            } else {
                left.join(",").into()
            };
            patch.insert(a.to_string(), v);
        }
    }
    if patch.is_empty() {
        return Ok(());
    }
    let api: Api<KafkaCluster> =
        Api::namespaced(client.clone(), &kc.namespace().unwrap_or_default());
    api.patch(
        &kc.name_any(),
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"metadata": {"annotations": patch}})),
    )
    .await
    .map_err(|e| err(format!("clearing the force annotations: {e}")))?;
    Ok(())
}

/// A `tls` user's Secret data and annotations and how long until its
/// certificate falls due for renewal, or why none is issued (condition
/// reason, message).
pub type UserCertificate = std::result::Result<
    (BTreeMap<String, String>, BTreeMap<String, String>, Duration),
    (&'static str, String),
>;

/// Keys of a `tls` KafkaUser's Secret.
pub const USER_CERT_KEY: &str = "user.crt";
pub const USER_KEY_KEY: &str = "user.key";
pub const USER_KEYSTORE_KEY: &str = "user-keystore.pem";
/// Annotation on a `tls` user's Secret: the clients CA its certificate
/// chains to (a new CA means a new certificate).
pub const USER_CA_ANNOTATION: &str = "skein.dev/clients-ca";

fn fingerprint(pem: &str) -> String {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    pem.hash(&mut h);
    format!("{:016x}", h.finish())
}

/// A `tls` user's Secret data and annotations: the certificate already in
/// `existing` while it was issued by the cluster's current clients CA and
/// is not due for renewal, else a new one for `CN=<user>`. `Ok(Err((reason,
/// message)))` when the cluster has no clients CA (none of its listeners
/// serves TLS), or its clients CA is its cluster CA (no certificate is
/// issued from a CA the replication listener trusts).
pub async fn user_certificate(
    client: &Client,
    names: &ClusterNames,
    user: &str,
    existing: Option<&Secret>,
    timing: Timing,
) -> Result<UserCertificate> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &names.namespace);
    let kc = Api::<KafkaCluster>::namespaced(client.clone(), &names.namespace)
        .get_opt(&names.cluster)
        .await
        .map_err(|e| err(format!("reading KafkaCluster {}: {e}", names.cluster)))?;
    let Some(kc) = kc else {
        return Ok(Err((
            "ClusterNotFound",
            format!("cluster {:?} does not exist", names.cluster),
        )));
    };
    let clients_ca = match &kc.spec.certificates.clients_ca_secret {
        Some(name) => Some(brought_ca(&secrets, name).await?.signer),
        None => read(&secrets, &names.clients_ca_secret())
            .await?
            .as_ref()
            .and_then(CaState::read)
            .map(|s| s.signer),
    };
    let cluster_ca = read(&secrets, &names.cluster_ca_cert()).await?;
    let (Some(clients_ca), Some(cluster_ca)) = (
        clients_ca,
        cluster_ca.as_ref().and_then(|s| text(s, CA_KEY)),
    ) else {
        return Ok(Err((
            "ClientsCaMissing",
            format!(
                "cluster {:?} has no clients CA yet (Secret {}): give it a listener with tls: true",
                names.cluster,
                names.clients_ca_secret()
            ),
        )));
    };
    if ca::same_key(&clients_ca.cert, &cluster_ca) {
        return Ok(Err((
            "SameCertificateAuthority",
            format!(
                "cluster {:?}: the clients CA is the cluster CA; no client certificate is issued from it",
                names.cluster
            ),
        )));
    }
    let policy = policy(&kc, timing);
    let ca_print = fingerprint(&clients_ca.cert);
    let annotations = BTreeMap::from([(USER_CA_ANNOTATION.to_string(), ca_print.clone())]);
    if let Some(s) = existing {
        let same_ca = s
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(USER_CA_ANNOTATION))
            == Some(&ca_print);
        if let (true, Some(cert), Some(key)) =
            (same_ca, text(s, USER_CERT_KEY), text(s, USER_KEY_KEY))
        {
            let renewal_in = policy.renewal_in(&cert);
            if !renewal_in.is_zero() {
                return Ok(Ok((
                    user_data(&cert, &key, &cluster_ca),
                    annotations,
                    renewal_in,
                )));
            }
        }
    }
    let issuer = ca_issuer(&clients_ca.cert, &clients_ca.key).map_err(err)?;
    let (cert, key) =
        leaf_valid(user, Vec::new(), &issuer, Some(policy.validity())).map_err(err)?;
    let renewal_in = policy.renewal_in(&cert);
    Ok(Ok((
        user_data(&cert, &key, &cluster_ca),
        annotations,
        renewal_in,
    )))
}

fn user_data(cert: &str, key: &str, cluster_ca: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (USER_CERT_KEY.to_string(), cert.to_string()),
        (USER_KEY_KEY.to_string(), key.to_string()),
        (USER_KEYSTORE_KEY.to_string(), format!("{key}{cert}")),
        (CA_KEY.to_string(), cluster_ca.to_string()),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cluster() -> KafkaCluster {
        crate::manifests::test_cluster(
            json!({"listeners": {"clients": [{"name": "tls", "port": 9093, "type": "internal", "tls": true}]}}),
        )
    }

    /// The certificate issued from a CA read back from its Secret chains to
    /// that CA (rustls verifies it for each name), and a new node address
    /// makes it unfit so it is issued again.
    #[test]
    fn the_brokers_certificate_chains_to_the_stored_ca_and_follows_the_nodes() {
        let kc = cluster();
        let names = ClusterNames::of(&kc);
        let p = policy(
            &kc,
            Timing {
                phase: Duration::from_secs(60),
                ..Timing::default()
            },
        );
        let cluster_ca = CaState::new(&cluster_ca_name(&names), &p).unwrap();
        let clients_ca = CaState::new(&clients_ca_name(&names), &p).unwrap();
        let sans = subject_alt_names(&names, &["10.0.0.7".into()]);
        let s = brokers_secret(&kc, &names, &cluster_ca, &clients_ca, &sans, &p).unwrap();
        assert!(brokers_secret_fits(&s, &cluster_ca, &clients_ca, &sans, &p));
        let moved = subject_alt_names(&names, &["10.0.0.7".into(), "10.0.0.8".into()]);
        assert!(!brokers_secret_fits(
            &s,
            &cluster_ca,
            &clients_ca,
            &moved,
            &p
        ));
        // A node no broker runs on for now keeps its name in the certificate.
        let fewer = subject_alt_names(&names, &[]);
        assert!(brokers_secret_fits(
            &s,
            &cluster_ca,
            &clients_ca,
            &fewer,
            &p
        ));
        let other_ca = CaState::new(&cluster_ca_name(&names), &p).unwrap();
        assert!(!brokers_secret_fits(&s, &other_ca, &clients_ca, &sans, &p));
        // Due for renewal 30 days before it expires (365 days from now).
        let later = Policy {
            now: p.now + 340 * 86_400,
            ..p
        };
        assert!(!brokers_secret_fits(
            &s,
            &cluster_ca,
            &clients_ca,
            &sans,
            &later
        ));

        // A TLS client that trusts only the cluster CA accepts the
        // certificate for a pod name, the bootstrap name and the node.
        let keystore = text(&s, KEYSTORE_KEY).unwrap();
        for host in [
            "demo-0.demo-brokers.ns.svc",
            "demo-bootstrap.ns.svc",
            "10.0.0.7",
        ] {
            verify(&keystore, &cluster_ca.signer.cert, host);
        }
    }

    /// Through a replacement of the cluster CA, a client that trusts the
    /// bundle it was given at each phase verifies the certificate the
    /// brokers serve at the next one; and a renewed CA (same key) still
    /// verifies what its earlier certificate signed and vice versa.
    #[test]
    fn clients_holding_each_phases_bundle_verify_the_next_phases_certificate() {
        let kc = cluster();
        let names = ClusterNames::of(&kc);
        let mut p = policy(
            &kc,
            Timing {
                phase: Duration::from_secs(60),
                ..Timing::default()
            },
        );
        let cn = cluster_ca_name(&names);
        let mut cluster_ca = CaState::new(&cn, &p).unwrap();
        let clients_ca = CaState::new(&clients_ca_name(&names), &p).unwrap();
        let sans = subject_alt_names(&names, &[]);
        let host = "demo-1.demo-brokers.ns.svc";
        let serve = |ca: &CaState, p: &Policy| {
            let s = brokers_secret(&kc, &names, ca, &clients_ca, &sans, p).unwrap();
            text(&s, KEYSTORE_KEY).unwrap()
        };
        let replace = Request {
            renew: false,
            replace: true,
        };
        let mut trusted = cluster_ca.bundle();
        let mut served = serve(&cluster_ca, &p);
        for (request, expect) in [
            (replace, ca::Step::TrustingNext),
            (Request::default(), ca::Step::Promoted),
            (Request::default(), ca::Step::DroppedOld),
        ] {
            p.now += 60;
            let (step, _) = cluster_ca.step(&cn, request, &p).unwrap();
            assert_eq!(step, Some(expect));
            // The clients of the last phase accept what is served now; the
            // clients of this phase accept what was served before.
            let now_served = serve(&cluster_ca, &p);
            verify(&now_served, &trusted, host);
            verify(&served, &cluster_ca.bundle(), host);
            trusted = cluster_ca.bundle();
            served = now_served;
        }
        let before = cluster_ca.signer.cert.clone();
        let (step, _) = cluster_ca
            .step(
                &cn,
                Request {
                    renew: true,
                    replace: false,
                },
                &p,
            )
            .unwrap();
        assert_eq!(step, Some(ca::Step::Renewed));
        assert_ne!(before, cluster_ca.signer.cert);
        verify(&serve(&cluster_ca, &p), &before, host);
        verify(&served, &cluster_ca.signer.cert, host);
    }

    /// A CA an administrator brings in cert-manager's layout (`tls.crt`,
    /// `tls.key`), with a subject of its own: the brokers' certificate it
    /// signs chains to it.
    #[test]
    fn a_brought_ca_in_cert_managers_layout_signs_the_brokers_certificate() {
        let kc = cluster();
        let names = ClusterNames::of(&kc);
        let p = policy(
            &kc,
            Timing {
                phase: Duration::from_secs(60),
                ..Timing::default()
            },
        );
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::OrganizationName, "Example Corp");
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "corp issuing CA");
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        let s = secret(
            &kc,
            &names,
            "corp-ca".into(),
            &[("tls.crt", &cert.pem()), ("tls.key", &key.serialize_pem())],
            None,
        );
        let brought = CaState::brought(Ca::brought(&s).unwrap());
        let clients_ca = CaState::new(&clients_ca_name(&names), &p).unwrap();
        let sans = subject_alt_names(&names, &[]);
        let b = brokers_secret(&kc, &names, &brought, &clients_ca, &sans, &p).unwrap();
        verify(
            &text(&b, KEYSTORE_KEY).unwrap(),
            &cert.pem(),
            "demo-bootstrap.ns.svc",
        );
        assert_eq!(
            ca_status("cluster", "corp-ca", &brought, true).phase,
            "Brought"
        );
    }

    /// Verifies `keystore`'s certificate for `host` against `ca` with
    /// rustls' WebPKI verifier.
    fn verify(keystore: &str, ca: &str, host: &str) {
        use rustls::client::danger::ServerCertVerifier;
        use rustls::pki_types::{pem::PemObject, CertificateDer, ServerName, UnixTime};
        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_slice_iter(ca.as_bytes()) {
            roots.add(c.unwrap()).unwrap();
        }
        let chain: Vec<CertificateDer> = CertificateDer::pem_slice_iter(keystore.as_bytes())
            .map(|c| c.unwrap())
            .collect();
        let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
            std::sync::Arc::new(roots),
            std::sync::Arc::new(rustls::crypto::ring::default_provider()),
        )
        .build()
        .unwrap();
        verifier
            .verify_server_cert(
                &chain[0],
                &chain[1..],
                &ServerName::try_from(host.to_string()).unwrap(),
                &[],
                UnixTime::now(),
            )
            .unwrap_or_else(|e| panic!("{host}: {e}"));
    }
}
