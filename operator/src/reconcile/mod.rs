//! The reconcilers. Each is a pipeline: dereference (reads) → validate (pure)
//! → build (pure) → apply (server-side apply, fixed order) → status → events.

pub mod brokers;
pub mod kafka_cluster;
pub mod kafka_user;
pub mod topic;

use std::fmt::Debug;

use k8s_openapi::NamespaceResourceScope;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::events::{Event, EventType};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::json;
use tracing::warn;

use crate::build::FIELD_MANAGER;
use crate::context::Context;
use crate::error::{Error, Result};

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
