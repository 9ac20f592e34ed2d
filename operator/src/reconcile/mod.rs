//! The reconcilers. Each is a pipeline: dereference (reads) → validate (pure)
//! → build (pure) → apply (server-side apply, fixed order) → status → events.

pub mod balance;
pub mod brokers;
pub mod desired_cluster;
pub mod features;
pub mod kafka_cluster;
pub mod kafka_user;
pub mod replication_throttle;
pub mod roll;
pub mod storage;
pub mod topic;

use std::fmt::Debug;

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use k8s_openapi::NamespaceResourceScope;
use kube::api::{Api, ObjectMeta, Patch, PatchParams};
use kube::runtime::events::{Event, EventType};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::json;
use skein_crds::KafkaCluster;
use tracing::warn;

use crate::context::Context;
use crate::error::{Error, Result};
use crate::manifests::FIELD_MANAGER;

/// Server-side applies one owned object (forcing ownership of our fields).
pub async fn apply<K>(client: &Client, namespace: &str, obj: &K) -> Result<K>
where
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>
        + Clone
        + Serialize
        + DeserializeOwned
        + Debug,
{
    let name = obj.meta().name.clone().unwrap_or_default();
    let api: Api<K> = Api::namespaced(client.clone(), namespace);
    api.patch(
        &name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(obj),
    )
    .await
    .map_err(|source| Error::Apply {
        kind: K::kind(&()).to_string(),
        name,
        source,
    })
}

/// Server-side applies the reconciler's part of a custom resource's status.
pub async fn patch_status<K, S>(api: &Api<K>, name: &str, status: &S) -> Result<()>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
    S: Serialize,
{
    let patch = json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "status": status,
    });
    api.patch_status(
        name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&patch),
    )
    .await
    .map_err(Error::Status)?;
    Ok(())
}

/// Publishes an Event about `obj`. Events are for humans: a failure to
/// publish is logged, never fails the reconcile.
pub async fn publish<K>(
    ctx: &Context,
    obj: &K,
    type_: EventType,
    reason: &str,
    action: &str,
    note: String,
) where
    K: Resource<DynamicType = ()>,
{
    let event = Event {
        type_,
        reason: reason.into(),
        note: Some(note),
        action: action.into(),
        secondary: None,
    };
    if let Err(e) = ctx.recorder.publish(&event, &obj.object_ref(&())).await {
        warn!(error = %e, reason, "could not publish event");
    }
}

/// The object `name` of kind `K` in `ns` (`None`: there is none); a failed
/// read is a [`Error::Dereference`] of `what`.
pub async fn get_opt<K>(
    ctx: &Context,
    ns: &str,
    name: &str,
    what: &'static str,
) -> Result<Option<K>>
where
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>
        + Clone
        + DeserializeOwned
        + Debug,
{
    let api: Api<K> = Api::namespaced(ctx.client.clone(), ns);
    api.get_opt(name)
        .await
        .map_err(|source| Error::Dereference { what, source })
}

/// The KafkaCluster a Topic or KafkaUser names (`None`: there is none).
pub async fn get_cluster(ctx: &Context, ns: &str, name: &str) -> Result<Option<KafkaCluster>> {
    get_opt(ctx, ns, name, "KafkaCluster").await
}

/// For a finalizer that cannot finish its cleanup: `Some(grace in seconds)`
/// once the cleanup grace period since the deletion request has run out
/// (the finalizer is then released), `None` while it is still retried.
pub fn cleanup_grace_over(meta: &ObjectMeta, ctx: &Context, now: Timestamp) -> Option<i64> {
    let deleted_at = meta.deletion_timestamp.as_ref().map(|t| t.0).unwrap_or(now);
    let grace = SignedDuration::try_from(ctx.topic_cleanup_grace).unwrap_or(SignedDuration::ZERO);
    (now.duration_since(deleted_at) >= grace).then(|| grace.as_secs())
}
