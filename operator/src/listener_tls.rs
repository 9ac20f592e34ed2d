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
//! The CAs are made once and read back after that (also by the next operator
//! after a failover). The brokers' certificate is issued again from the same
//! CA when it lacks a name it must hold (a broker pod lands on another
//! node): the subject alternative names it was issued for are recorded in an
//! annotation on its Secret.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::ByteString;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use skein_crds::KafkaCluster;

use crate::build::listeners::{CA_KEY, CLIENTS_CA_KEY, KEYSTORE_KEY};
use crate::build::{owned_meta, ClusterNames, FIELD_MANAGER};
use crate::error::{Error, Result};
use crate::local_tls::{ca_issuer, leaf, new_ca};

const CA_PRIVATE_KEY: &str = "ca.key";
/// Annotation on the brokers' Secret: the names its certificate holds.
const SANS_ANNOTATION: &str = "skein.dev/subject-alternative-names";

fn err(what: impl std::fmt::Display) -> Error {
    Error::Certificates(what.to_string())
}

async fn read(secrets: &Api<Secret>, name: String) -> Result<Option<Secret>> {
    secrets
        .get_opt(&name)
        .await
        .map_err(|e| err(format!("reading Secret {name}: {e}")))
}

fn text(secret: &Secret, key: &str) -> Option<String> {
    let bytes = secret.data.as_ref()?.get(key)?;
    String::from_utf8(bytes.0.clone()).ok()
}

fn cluster_ca_name(names: &ClusterNames) -> String {
    format!("skein cluster CA {}/{}", names.namespace, names.cluster)
}

fn clients_ca_name(names: &ClusterNames) -> String {
    format!("skein clients CA {}/{}", names.namespace, names.cluster)
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

/// A CA's certificate and key, as PEM.
#[derive(Clone, Debug, PartialEq)]
struct Ca {
    cert: String,
    key: String,
}

impl Ca {
    fn new(cn: &str) -> Result<Self> {
        let ca = new_ca(cn).map_err(err)?;
        Ok(Ca {
            cert: ca.pem(),
            key: ca.key().serialize_pem(),
        })
    }

    fn read(secret: &Secret) -> Option<Self> {
        Some(Ca {
            cert: text(secret, CA_KEY)?,
            key: text(secret, CA_PRIVATE_KEY)?,
        })
    }
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

/// The brokers' Secret for `sans`, signed by `cluster_ca`.
fn brokers_secret(
    kc: &KafkaCluster,
    names: &ClusterNames,
    cluster_ca: &Ca,
    clients_ca: &Ca,
    sans: &[String],
) -> Result<Secret> {
    let issuer = ca_issuer(&cluster_ca_name(names), &cluster_ca.key).map_err(err)?;
    let (cert, key) = leaf("skein-broker", sans.to_vec(), &issuer).map_err(err)?;
    Ok(secret(
        kc,
        names,
        names.listener_tls_secret(),
        &[
            (KEYSTORE_KEY, &format!("{key}{cert}")),
            (CA_KEY, &cluster_ca.cert),
            (CLIENTS_CA_KEY, &clients_ca.cert),
        ],
        Some(BTreeMap::from([(
            SANS_ANNOTATION.to_string(),
            sans.join(","),
        )])),
    ))
}

/// Whether `current` (the brokers' Secret as it is) still fits: issued by
/// these CAs for at least `sans`. A name it holds beyond them (a node no
/// broker runs on for the moment, e.g. while a pod is being recreated) is
/// no reason to issue it again: the brokers would reload for nothing.
fn brokers_secret_fits(
    current: &Secret,
    cluster_ca: &Ca,
    clients_ca: &Ca,
    sans: &[String],
) -> bool {
    let issued_for: Vec<&str> = current
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(SANS_ANNOTATION))
        .map(|s| s.split(',').collect())
        .unwrap_or_default();
    sans.iter().all(|n| issued_for.contains(&n.as_str()))
        && text(current, CA_KEY).as_ref() == Some(&cluster_ca.cert)
        && text(current, CLIENTS_CA_KEY).as_ref() == Some(&clients_ca.cert)
        && text(current, KEYSTORE_KEY).is_some()
}

/// Makes or keeps the listener certificates of `kc` (nothing when no
/// client listener serves TLS). `node_addresses`: where the brokers run.
pub async fn ensure(client: &Client, kc: &KafkaCluster, node_addresses: &[String]) -> Result<()> {
    if !crate::build::listeners::any_tls(kc) {
        return Ok(());
    }
    let names = ClusterNames::of(kc);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &names.namespace);
    let pp = PatchParams::apply(FIELD_MANAGER).force();
    let get = |name: String| read(&secrets, name);
    let write = |s: Secret| {
        let (secrets, pp) = (&secrets, &pp);
        async move {
            let name = s.metadata.name.clone().unwrap_or_default();
            secrets
                .patch(&name, pp, &Patch::Apply(&s))
                .await
                .map_err(|e| err(format!("writing Secret {name}: {e}")))
        }
    };

    let mut made = Vec::new();
    let mut ca_of = |existing: Option<Secret>, cn: String, secret_name: String| match existing
        .as_ref()
        .and_then(Ca::read)
    {
        Some(ca) => Ok::<_, Error>((ca, None)),
        None => {
            let ca = Ca::new(&cn)?;
            made.push(secret_name.clone());
            let s = secret(
                kc,
                &names,
                secret_name,
                &[(CA_KEY, &ca.cert), (CA_PRIVATE_KEY, &ca.key)],
                None,
            );
            Ok((ca, Some(s)))
        }
    };
    let (cluster_ca, new_cluster_ca) = ca_of(
        get(names.cluster_ca_secret()).await?,
        cluster_ca_name(&names),
        names.cluster_ca_secret(),
    )?;
    let (clients_ca, new_clients_ca) = ca_of(
        get(names.clients_ca_secret()).await?,
        clients_ca_name(&names),
        names.clients_ca_secret(),
    )?;
    for s in [new_cluster_ca, new_clients_ca].into_iter().flatten() {
        write(s).await?;
    }

    // What clients need to trust the brokers: a Secret and a ConfigMap.
    write(secret(
        kc,
        &names,
        names.cluster_ca_cert(),
        &[(CA_KEY, &cluster_ca.cert)],
        None,
    ))
    .await?;
    let cm = ConfigMap {
        metadata: owned_meta(kc, &names, names.cluster_ca_cert()),
        data: Some(BTreeMap::from([(
            CA_KEY.to_string(),
            cluster_ca.cert.clone(),
        )])),
        ..ConfigMap::default()
    };
    Api::<ConfigMap>::namespaced(client.clone(), &names.namespace)
        .patch(&names.cluster_ca_cert(), &pp, &Patch::Apply(&cm))
        .await
        .map_err(|e| {
            err(format!(
                "writing ConfigMap {}: {e}",
                names.cluster_ca_cert()
            ))
        })?;

    let sans = subject_alt_names(&names, node_addresses);
    let current = get(names.listener_tls_secret()).await?;
    if !current
        .as_ref()
        .is_some_and(|c| brokers_secret_fits(c, &cluster_ca, &clients_ca, &sans))
    {
        write(brokers_secret(kc, &names, &cluster_ca, &clients_ca, &sans)?).await?;
        tracing::info!(cluster = %names.cluster, namespace = %names.namespace,
            made = ?made, names = %sans.join(","),
            "listener certificate issued (Secret {})", names.listener_tls_secret());
    }
    Ok(())
}

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
/// `existing` while it still chains to the cluster's clients CA, else a new
/// one for `CN=<user>`. `Ok(Err(reason))` when the cluster has no clients CA
/// (none of its listeners serves TLS).
pub async fn user_certificate(
    client: &Client,
    names: &ClusterNames,
    user: &str,
    existing: Option<&Secret>,
) -> Result<std::result::Result<(BTreeMap<String, String>, BTreeMap<String, String>), String>> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &names.namespace);
    let clients_ca = read(&secrets, names.clients_ca_secret()).await?;
    let cluster_ca = read(&secrets, names.cluster_ca_cert()).await?;
    let (Some(clients_ca), Some(cluster_ca)) = (
        clients_ca.as_ref().and_then(Ca::read),
        cluster_ca.as_ref().and_then(|s| text(s, CA_KEY)),
    ) else {
        return Ok(Err(format!(
            "cluster {:?} has no clients CA yet (Secret {}): give it a listener with tls: true",
            names.cluster,
            names.clients_ca_secret()
        )));
    };
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
            return Ok(Ok((user_data(&cert, &key, &cluster_ca), annotations)));
        }
    }
    let issuer = ca_issuer(&clients_ca_name(names), &clients_ca.key).map_err(err)?;
    let (cert, key) = leaf(user, Vec::new(), &issuer).map_err(err)?;
    Ok(Ok((user_data(&cert, &key, &cluster_ca), annotations)))
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
        crate::build::test_cluster(
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
        let cluster_ca = Ca::new(&cluster_ca_name(&names)).unwrap();
        let clients_ca = Ca::new(&clients_ca_name(&names)).unwrap();
        let sans = subject_alt_names(&names, &["10.0.0.7".into()]);
        let s = brokers_secret(&kc, &names, &cluster_ca, &clients_ca, &sans).unwrap();
        assert!(brokers_secret_fits(&s, &cluster_ca, &clients_ca, &sans));
        let moved = subject_alt_names(&names, &["10.0.0.7".into(), "10.0.0.8".into()]);
        assert!(!brokers_secret_fits(&s, &cluster_ca, &clients_ca, &moved));
        // A node no broker runs on for now keeps its name in the certificate.
        let fewer = subject_alt_names(&names, &[]);
        assert!(brokers_secret_fits(&s, &cluster_ca, &clients_ca, &fewer));
        let other_ca = Ca::new(&cluster_ca_name(&names)).unwrap();
        assert!(!brokers_secret_fits(&s, &other_ca, &clients_ca, &sans));

        // A TLS client that trusts only the cluster CA accepts the
        // certificate for a pod name, the bootstrap name and the node.
        let keystore = text(&s, KEYSTORE_KEY).unwrap();
        for host in [
            "demo-0.demo-brokers.ns.svc",
            "demo-bootstrap.ns.svc",
            "10.0.0.7",
        ] {
            verify(&keystore, &cluster_ca.cert, host);
        }
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
