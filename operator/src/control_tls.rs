//! The certificates of a cluster's control plane on Kubernetes
//! (`spec.listeners.controlPlaneTls`), kept in two Secrets owned by the
//! KafkaCluster:
//!
//! - `<cluster>-control-ca`: the cluster's own certificate authority (its
//!   key too) and the controller's certificate. Only the operator reads it.
//! - `<cluster>-control-tls`: the brokers' key and certificate (subject
//!   `CN=skein-broker`, valid for every pod name under the headless
//!   Service) and the CA certificate. Mounted into the broker pods.
//!
//! Made once, on the first reconcile that needs them, and read back after
//! that (also by the next operator after a failover). A missing or
//! unreadable Secret makes both anew; brokers read theirs when they start,
//! so they take new ones at their next restart.

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::ByteString;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use skein_crds::KafkaCluster;

use crate::build::control_tls::{CA_KEY, KEYSTORE_KEY};
use crate::build::{owned_meta, ClusterNames};
use crate::ca::text;
use crate::error::ControllerStartError;
use crate::local_tls::{leaf, new_ca, CONTROLLER_CN};

/// Keys of the CA Secret besides the CA certificate.
const CA_PRIVATE_KEY: &str = "ca.key";
const CONTROLLER_KEYSTORE_KEY: &str = "controller-keystore.pem";

/// The controller's TLS client settings for one cluster.
#[derive(Clone)]
pub struct ControlTls {
    /// Tells two generations of the certificates apart.
    pub fingerprint: u64,
    pub config: Arc<rustls::ClientConfig>,
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
struct Material {
    ca_cert: String,
    ca_key: String,
    controller_keystore: String,
    broker_keystore: String,
}

impl Material {
    fn new(names: &ClusterNames) -> Result<Self, ControllerStartError> {
        let ca = new_ca(&format!(
            "skein control plane {}/{}",
            names.namespace, names.cluster
        ))
        .map_err(err)?;
        let domain = format!("{}.{}.svc", names.headless_service(), names.namespace);
        let sans = vec![format!("*.{domain}"), format!("*.{domain}.cluster.local")];
        let (broker_cert, broker_key) = leaf("skein-broker", sans, &ca).map_err(err)?;
        let (controller_cert, controller_key) =
            leaf(CONTROLLER_CN, Vec::new(), &ca).map_err(err)?;
        Ok(Material {
            ca_cert: ca.pem(),
            ca_key: ca.key().serialize_pem(),
            controller_keystore: format!("{controller_key}{controller_cert}"),
            broker_keystore: format!("{broker_key}{broker_cert}"),
        })
    }

    fn read(ca: &Secret, brokers: &Secret) -> Option<Self> {
        let m = Material {
            ca_cert: text(ca, CA_KEY)?,
            ca_key: text(ca, CA_PRIVATE_KEY)?,
            controller_keystore: text(ca, CONTROLLER_KEYSTORE_KEY)?,
            broker_keystore: text(brokers, KEYSTORE_KEY)?,
        };
        // The brokers' Secret must carry the same CA.
        (text(brokers, CA_KEY)? == m.ca_cert).then_some(m)
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

    fn client(&self) -> Result<ControlTls, String> {
        let config = skein_controller::rpc::tls::client_config_pem(
            self.controller_keystore.as_bytes(),
            self.ca_cert.as_bytes(),
        )?;
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (&self.ca_cert, &self.controller_keystore).hash(&mut h);
        Ok(ControlTls {
            fingerprint: h.finish(),
            config,
        })
    }
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

/// The controller's client settings for `kc`'s control plane, making the
/// Secrets first if they are missing; `None` when the cluster does not
/// ask for TLS.
pub async fn ensure(
    client: &Client,
    kc: &KafkaCluster,
) -> Result<Option<ControlTls>, ControllerStartError> {
    if !kc.spec.listeners.control_plane_tls {
        return Ok(None);
    }
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
    if let (Some(ca), Some(brokers)) = (&ca, &brokers) {
        if let Some(m) = Material::read(ca, brokers) {
            match m.client() {
                Ok(tls) => return Ok(Some(tls)),
                Err(e) => tracing::warn!(cluster = %names.cluster, namespace = %names.namespace,
                    "control-plane certificates unusable ({e}); making new ones"),
            }
        }
    }
    let m = Material::new(&names)?;
    let pp = PatchParams::apply(crate::build::FIELD_MANAGER).force();
    for s in m.secrets(kc, &names) {
        let name = s.metadata.name.clone().unwrap_or_default();
        api.patch(&name, &pp, &Patch::Apply(&s))
            .await
            .map_err(|e| err(format!("writing Secret {name}: {e}")))?;
    }
    tracing::info!(cluster = %names.cluster, namespace = %names.namespace,
        "control-plane certificates made (Secrets {} and {})",
        names.control_ca_secret(), names.control_tls_secret());
    m.client().map(Some).map_err(err)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cluster() -> KafkaCluster {
        crate::build::test_cluster(json!({"listeners": {"controlPlaneTls": true}}))
    }

    #[test]
    fn the_secrets_read_back_to_the_same_material_and_a_foreign_ca_is_refused() {
        let kc = cluster();
        let names = ClusterNames::of(&kc);
        let m = Material::new(&names).unwrap();
        let [ca, brokers] = m.secrets(&kc, &names);
        assert_eq!(ca.metadata.name.as_deref(), Some("demo-control-ca"));
        assert_eq!(brokers.metadata.name.as_deref(), Some("demo-control-tls"));
        let back = Material::read(&ca, &brokers).expect("readable");
        assert_eq!(
            back.client().unwrap().fingerprint,
            m.client().unwrap().fingerprint
        );
        assert!(!m.broker_keystore.contains(&m.ca_key));
        // The brokers' Secret holds no CA key and no controller key.
        let broker_data = brokers.data.unwrap();
        assert_eq!(
            broker_data.keys().collect::<Vec<_>>(),
            vec![KEYSTORE_KEY, CA_KEY]
        );
        // A brokers' Secret from another CA does not pass.
        let other = Material::new(&names).unwrap();
        let [_, foreign] = other.secrets(&kc, &names);
        assert!(Material::read(&ca, &foreign).is_none());
    }
}
