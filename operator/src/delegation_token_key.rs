//! The Secret `<cluster>-delegation-token-key`: the brokers'
//! `delegation.token.secret.key` when `spec.delegationTokens.enabled`.
//!
//! Every broker must hold the same key (a token's password is the HMAC of
//! its id under it), and it must outlive pods and rolls, or every token
//! stops working. The operator makes it once, 32 random bytes in hex,
//! owned by the KafkaCluster (so it goes with the cluster), and never
//! rewrites it: turning tokens off and on again keeps the tokens that were
//! issued valid. Brokers read it from the environment
//! ([`ENV`], `secretKeyRef`), never from the ConfigMap.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::ByteString;
use kube::api::Api;
use kube::{Client, ResourceExt};
use ring::rand::SecureRandom;

use crate::manifests::{owned_meta, ClusterNames};
use crate::ownership::{Foreign, Written};
use skein_crds::KafkaCluster;

/// The environment variable the broker reads the key from.
pub const ENV: &str = "SKEIN_DELEGATION_TOKEN_SECRET_KEY";
/// The key of the Secret's data that holds it.
pub const KEY: &str = "secret-key";

/// A new key: 32 random bytes in hex (a string, as Kafka's setting is).
pub fn new_key() -> String {
    let mut bytes = [0u8; 32];
    ring::rand::SystemRandom::new()
        .fill(&mut bytes)
        .expect("the system random source works");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether `existing` holds a usable key.
fn holds_key(existing: &Secret) -> bool {
    existing
        .data
        .as_ref()
        .and_then(|d| d.get(KEY))
        .is_some_and(|v| !v.0.is_empty())
}

/// Makes the Secret when tokens are on and it is missing (or lacks the
/// key). `Ok(Err(_))`: a Secret of that name that is not the cluster's,
/// which is neither read nor written.
pub async fn ensure(
    client: &Client,
    kc: &KafkaCluster,
) -> Result<Result<(), Foreign>, kube::Error> {
    if !kc.delegation_tokens_enabled() {
        return Ok(Ok(()));
    }
    let names = ClusterNames::of(kc);
    let name = names.delegation_token_secret();
    let api: Api<Secret> = Api::namespaced(client.clone(), &names.namespace);
    let existing = api.get_opt(&name).await?;
    let uid = kc.uid();
    if let Err(foreign) = crate::ownership::check(
        "Secret",
        &name,
        existing.as_ref().map(|s| &s.metadata),
        uid.as_deref(),
    ) {
        return Ok(Err(foreign));
    }
    if existing.as_ref().is_some_and(holds_key) {
        return Ok(Ok(()));
    }
    let secret = Secret {
        metadata: owned_meta(kc, &names, name.clone()),
        type_: Some("Opaque".into()),
        data: Some(BTreeMap::from([(
            KEY.to_string(),
            ByteString(new_key().into_bytes()),
        )])),
        ..Secret::default()
    };
    match crate::ownership::write(&api, &secret, existing.as_ref(), uid.as_deref()).await? {
        Written::Done(_) => {
            tracing::info!(cluster = %names.cluster, namespace = %names.namespace,
                "delegation token key made (Secret {name})");
            Ok(Ok(()))
        }
        Written::Foreign(f) => Ok(Err(f)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_random_hex_of_32_bytes() {
        let (a, b) = (new_key(), new_key());
        assert_ne!(a, b);
        assert_eq!(a.len(), 64);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
        let mut s = Secret::default();
        assert!(!holds_key(&s));
        s.data = Some(BTreeMap::from([(
            KEY.to_string(),
            ByteString(a.into_bytes()),
        )]));
        assert!(holds_key(&s));
    }
}
