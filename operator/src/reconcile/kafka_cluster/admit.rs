//! The steps that decide whether the spec is applied at all: the Topics it
//! must fit, its validation, and the start of the cluster's controller
//! (whose sealing key may be unusable). A refusal is a condition on the
//! object, never an error.

use kube::api::{Api, ListParams};
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::ResourceExt;
use skein_crds::Topic;
use tracing::warn;

use super::state::{Cx, Found, Outcome, REQUEUE_REFUSED};
use crate::error::{ControllerStartError, Error, Result};
use crate::reconcile::patch_status;
use crate::{status, validate};

/// Dereference: the topics of this cluster decide whether a scale-down fits.
pub async fn topics(cx: &Cx<'_>, found: &mut Found) -> Result<Outcome> {
    let topics: Api<Topic> = Api::namespaced(cx.ctx.client.clone(), &cx.ns);
    found.topics = topics
        .list(&ListParams::default())
        .await
        .map_err(|source| Error::Dereference {
            what: "topics",
            source,
        })?
        .items
        .into_iter()
        .filter(|t| t.spec.cluster_ref.name == cx.name)
        .collect();
    Ok(Outcome::Continue)
}

/// Validate: a refused spec is a condition on the object, not an error
/// (retrying cannot fix it; the next spec change triggers a reconcile).
pub async fn validate(cx: &Cx<'_>, found: &mut Found) -> Result<Outcome> {
    let kc = cx.kc;
    if let Err(invalid) = validate::validate_cluster(kc, &found.topics) {
        refuse(cx, &invalid).await?;
        return Ok(Outcome::Done(Action::await_change()));
    }

    // A Kubernetes user who still turns the control plane's TLS off is told
    // it stays on (the field is kept so such manifests still apply).
    if kc.spec.listeners.control_plane_tls == Some(false) && cx.generation_is_new() {
        cx.publish(
            EventType::Warning,
            "ControlPlaneTlsIgnored",
            "Validate",
            "spec.listeners.controlPlaneTls is deprecated and ignored: the control plane is always on mutual TLS".into(),
        )
        .await;
    }
    Ok(Outcome::Continue)
}

/// The cluster's controller (kubernetes platform): started on first
/// sight, then kept in session with every broker of the spec. It decides
/// how far the StatefulSet may shrink (leaving brokers are drained first).
/// Its control-plane certificates are made or renewed on the way.
/// A sealing key it cannot use (docs/metadata-store.md) refuses the
/// cluster with a condition naming the Secret, looked at again every 30 s.
pub async fn start_controller(cx: &Cx<'_>, found: &mut Found) -> Result<Outcome> {
    let kc = cx.kc;
    found.controller = match &cx.ctx.controllers {
        Some(controllers) => match controllers.ensure(kc).await {
            Ok(rt) => Some(rt),
            Err(ControllerStartError::MetadataKey(why)) => {
                let refused = validate::InvalidSpec::MetadataKeyUnusable(why);
                // `refuse` sends the Event for a new generation; a key that
                // goes bad under an unchanged spec gets one too, once.
                let reported = kc
                    .status
                    .iter()
                    .flat_map(|s| &s.conditions)
                    .any(|c| c.type_ == "Degraded" && c.reason.as_str() == refused.reason());
                if !reported && !cx.generation_is_new() {
                    cx.publish(
                        EventType::Warning,
                        refused.reason(),
                        "StartController",
                        refused.to_string(),
                    )
                    .await;
                }
                refuse(cx, &refused).await?;
                return Ok(Outcome::Done(Action::requeue(REQUEUE_REFUSED)));
            }
            Err(e) => return Err(e.into()),
        },
        None => None,
    };
    Ok(Outcome::Continue)
}

/// Reports a spec that cannot be applied: the condition, and a Warning
/// event the first time a generation is refused.
pub async fn refuse(cx: &Cx<'_>, invalid: &validate::InvalidSpec) -> Result<()> {
    let kc = cx.kc;
    warn!(cluster = %cx.name, namespace = ?kc.namespace(), reason = invalid.reason(), "refusing spec: {invalid}");
    let patch = status::cluster_invalid(kc, invalid, cx.now.clone());
    patch_status(&cx.clusters, &cx.name, &patch).await?;
    if cx.generation_is_new() {
        cx.publish(
            EventType::Warning,
            invalid.reason(),
            "Validate",
            invalid.to_string(),
        )
        .await;
    }
    Ok(())
}
