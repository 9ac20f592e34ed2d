//! `spec.featureLevel`: finalizing `skein.version`
//! ([`skein_controller::features`], docs/upgrades.md) once every broker of
//! the spec is up and nothing else is in progress. The controller refuses
//! while a registered broker runs a release that lacks the level; the
//! refusal is the cluster's `Degraded` condition until the brokers are
//! rolled.

use skein_controller::features::SKEIN_VERSION;
use skein_controller::requests as req;
use skein_controller::{Call, ControlPlaneError};
use skein_crds::KafkaCluster;
use tracing::{info, warn};

use super::brokers::Progress;
use crate::cluster_controllers::ClusterController;
use crate::reconcile::desired_cluster::DesiredCluster;

/// What the step did.
#[derive(Debug, Default)]
pub struct FeatureStep {
    /// The level finalized now (after the step).
    pub finalized: i16,
    /// Raised from this level in this step.
    pub raised_from: Option<i16>,
    /// Why the level of the spec cannot be finalized.
    pub blocked: Option<String>,
    /// Waiting for the brokers.
    pub progress: Option<Progress>,
}

/// Finalizes the level of `spec.featureLevel` when it is above the current
/// one and the cluster is settled (`busy`: a roll, drain or move is under
/// way, which the level waits for).
pub fn feature_step(
    rt: &ClusterController,
    kc: &KafkaCluster,
    desired: &DesiredCluster,
    busy: bool,
) -> FeatureStep {
    let current = rt.controller.feature_level(SKEIN_VERSION);
    let mut step = FeatureStep {
        finalized: current,
        ..Default::default()
    };
    let Some(want) = kc.spec.feature_level.filter(|w| *w > current) else {
        return step;
    };
    if busy {
        return step;
    }
    let view = rt.controller.view();
    let missing: Vec<i32> = (0..desired.replicas)
        .filter(|b| !view.brokers.get(b).is_some_and(|m| m.alive))
        .collect();
    if !missing.is_empty() {
        step.progress = Some(Progress {
            reason: "FinalizingFeatureLevel",
            message: format!(
                "{SKEIN_VERSION} {want} is finalized once every broker is up (waiting for {missing:?})"
            ),
        });
        return step;
    }
    let result = rt.controller.call(req::UpdateFeature {
        feature: SKEIN_VERSION.into(),
        level: want,
        validate_only: false,
    });
    match result {
        Ok(from) => {
            info!(cluster = %kc.metadata.name.as_deref().unwrap_or(""), from, to = want, "{SKEIN_VERSION} finalized");
            step.finalized = want;
            step.raised_from = Some(from);
        }
        Err(ControlPlaneError::Controller(e)) => {
            warn!(cluster = %kc.metadata.name.as_deref().unwrap_or(""), level = want, error = %e, "{SKEIN_VERSION} not finalized");
            step.blocked = Some(e.to_string());
        }
        Err(e) => step.blocked = Some(e.to_string()),
    }
    step
}
