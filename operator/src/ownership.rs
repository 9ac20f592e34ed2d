//! Which objects the operator may write: only those it made for the same
//! owner. A Secret (or the CA ConfigMap) it wants to write under a name that
//! something else already uses — a KafkaUser named `<cluster>-cluster-ca`,
//! another user's Secret, an unrelated application's — is left alone, and the
//! resource that wanted it gets a condition saying whose it is. A forced
//! server-side apply would otherwise take the object over and add an owner
//! reference, and garbage collection would later delete it with the
//! KafkaUser.
//!
//! The rule ([`check`]) is pure: the object is absent, or one of its owner
//! references names the owner's uid. [`write`] carries it out without a
//! window between the read and the write: a new object is created (which
//! fails if one appeared meanwhile) and every write of an existing one
//! carries the `resourceVersion` that was checked (which fails if it changed
//! meanwhile).

use std::fmt::Debug;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::NamespaceResourceScope;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::Resource;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::manifests::FIELD_MANAGER;

/// An object that exists under a name the operator wants, owned by someone
/// else.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Foreign {
    /// Kind and name of the object (`Secret demo-cluster-ca`).
    pub object: String,
    /// Its owners as `Kind/name`, or `no owner`.
    pub owner: String,
}

impl std::fmt::Display for Foreign {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} exists and is not this resource's (owner: {}); the operator writes only what it made for this resource: delete or rename it",
            self.object, self.owner
        )
    }
}

/// The owners of `meta` as `Kind/name` (`no owner` when it has none).
pub fn owners(meta: &ObjectMeta) -> String {
    let refs = meta.owner_references.as_deref().unwrap_or_default();
    if refs.is_empty() {
        return "no owner".into();
    }
    refs.iter()
        .map(|o| format!("{}/{}", o.kind, o.name))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Whether the operator may write `existing` (kind `kind`, name `name`) for
/// the resource whose uid is `owner_uid`: it does not exist, or one of its
/// owner references names that uid.
pub fn check(
    kind: &str,
    name: &str,
    existing: Option<&ObjectMeta>,
    owner_uid: Option<&str>,
) -> Result<(), Foreign> {
    let Some(meta) = existing else {
        return Ok(());
    };
    let ours =
        owner_uid.is_some_and(|uid| meta.owner_references.iter().flatten().any(|o| o.uid == uid));
    if ours {
        Ok(())
    } else {
        Err(Foreign {
            object: format!("{kind} {name}"),
            owner: owners(meta),
        })
    }
}

/// What [`write`] did.
#[derive(Debug)]
pub enum Written<K> {
    /// The object as the API server holds it now.
    Done(K),
    /// Someone else's: nothing was written.
    Foreign(Foreign),
}

/// Writes `obj` (which carries its owner reference) if [`check`] allows it
/// against `existing`, the object as just read. A new object is created
/// whole, content and all (a create fails if one appeared meanwhile, instead
/// of taking the other object over, and nobody ever sees the object without
/// its content); an existing one is server-side applied with the
/// `resourceVersion` checked, so a change since the read fails with a
/// conflict (retried by the next reconcile).
pub async fn write<K>(
    api: &Api<K>,
    obj: &K,
    existing: Option<&K>,
    owner_uid: Option<&str>,
) -> Result<Written<K>, kube::Error>
where
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>
        + Clone
        + Serialize
        + DeserializeOwned
        + Debug,
{
    let name = obj.meta().name.clone().unwrap_or_default();
    if let Err(foreign) = check(&K::kind(&()), &name, existing.map(|e| e.meta()), owner_uid) {
        return Ok(Written::Foreign(foreign));
    }
    let Some(existing) = existing else {
        let pp = PostParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..PostParams::default()
        };
        return api.create(&pp, obj).await.map(Written::Done);
    };
    let mut obj = obj.clone();
    obj.meta_mut().resource_version = existing.meta().resource_version.clone();
    let pp = PatchParams::apply(FIELD_MANAGER).force();
    api.patch(&name, &pp, &Patch::Apply(&obj))
        .await
        .map(Written::Done)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    use super::*;

    fn owned_by(refs: &[(&str, &str, &str)]) -> ObjectMeta {
        ObjectMeta {
            name: Some("demo-cluster-ca".into()),
            owner_references: Some(
                refs.iter()
                    .map(|(kind, name, uid)| OwnerReference {
                        api_version: "skein.dev/v1alpha1".into(),
                        kind: kind.to_string(),
                        name: name.to_string(),
                        uid: uid.to_string(),
                        ..OwnerReference::default()
                    })
                    .collect(),
            ),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn an_absent_object_or_one_naming_the_owners_uid_may_be_written() {
        assert_eq!(check("Secret", "s", None, Some("u1")), Ok(()));
        assert_eq!(check("Secret", "s", None, None), Ok(()));
        let ours = owned_by(&[("KafkaCluster", "demo", "u1")]);
        assert_eq!(check("Secret", "s", Some(&ours), Some("u1")), Ok(()));
        // Among other owners is enough: the owner reference is what GC
        // follows, so an object naming us is one we made.
        let shared = owned_by(&[("Other", "x", "u9"), ("KafkaCluster", "demo", "u1")]);
        assert_eq!(check("Secret", "s", Some(&shared), Some("u1")), Ok(()));
    }

    #[test]
    fn anything_else_is_foreign_and_says_whose_it_is() {
        // A KafkaUser named after the cluster CA's Secret finds it owned by
        // the cluster.
        let ca = owned_by(&[("KafkaCluster", "demo", "u1")]);
        let e = check("Secret", "demo-cluster-ca", Some(&ca), Some("user-uid")).unwrap_err();
        assert_eq!(e.object, "Secret demo-cluster-ca");
        assert_eq!(e.owner, "KafkaCluster/demo");
        assert!(e.to_string().contains("delete or rename it"), "{e}");
        // Same name, same kind, another uid: a KafkaUser deleted and made
        // again before its old Secret was collected.
        let old = owned_by(&[("KafkaUser", "alice", "old-uid")]);
        assert!(check("Secret", "alice", Some(&old), Some("new-uid")).is_err());
        // An application's Secret, owned by nobody.
        let app = ObjectMeta {
            name: Some("app".into()),
            ..ObjectMeta::default()
        };
        assert_eq!(
            check("Secret", "app", Some(&app), Some("u1"))
                .unwrap_err()
                .owner,
            "no owner"
        );
        // An owner without a uid (never from the API server) owns nothing.
        assert!(check("Secret", "demo-cluster-ca", Some(&ca), None).is_err());
    }
}
