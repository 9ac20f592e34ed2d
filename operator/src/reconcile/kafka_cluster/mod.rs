//! Reconciler of `KafkaCluster`: an ordered list of named steps
//! ([`pipeline::STEPS`]): dereference and validate ([`admit`]) → listener
//! Services and certificates ([`listeners`]) → build and apply ConfigMap,
//! Services, ServiceAccount, PDB, StatefulSet (in that order, so the
//! StatefulSet's pods find their config and DNS) and volumes ([`apply`]) →
//! rolling restart, feature level, balancer ([`converge`]) → status →
//! events ([`report`]).

pub mod admit;
pub mod apply;
pub mod converge;
pub mod listeners;
pub mod pipeline;
pub mod report;
pub mod state;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::runtime::controller::Action;
use skein_crds::KafkaCluster;
use tracing::warn;

use crate::context::Context;
use crate::error::{Error, Result};
pub use pipeline::{Step, STEPS};
pub use state::{Cx, Found, Outcome};

/// Resource kind label for metrics.
pub const KIND: &str = "KafkaCluster";

/// Reconciles one KafkaCluster, timed and counted.
pub async fn reconcile(kc: Arc<KafkaCluster>, ctx: Arc<Context>) -> Result<Action> {
    let _timer = ctx.metrics.reconcile_started(KIND);
    reconcile_at(&kc, &ctx, Time(Timestamp::now())).await
}

/// [`reconcile`] with the clock passed in (tests fix it): every step of
/// [`STEPS`] in order, until one stops the reconcile; when none does, back
/// as [`report::requeue`] says.
pub async fn reconcile_at(kc: &KafkaCluster, ctx: &Context, now: Time) -> Result<Action> {
    let cx = Cx::new(kc, ctx, now)?;
    let mut found = Found::default();
    for step in STEPS {
        tracing::trace!(step = step.name(), "reconcile step");
        if let Outcome::Done(action) = step.run(&cx, &mut found).await? {
            return Ok(action);
        }
    }
    Ok(report::requeue(&cx.desired, &found))
}

/// Counts the failure and retries with a short delay.
pub fn error_policy(_kc: Arc<KafkaCluster>, error: &Error, ctx: Arc<Context>) -> Action {
    warn!(error = %error, "KafkaCluster reconcile failed");
    ctx.metrics.reconcile_failed(KIND, error);
    Action::requeue(Duration::from_secs(15))
}
