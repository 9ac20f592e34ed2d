//! What the steps of a KafkaCluster reconcile share: [`Cx`], read once
//! before the first step and never changed, and [`Found`], where each step
//! leaves what it learned or decided for the steps after it (the status is
//! built from it in one place, `report::cluster_status`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::ResourceExt;
use skein_crds::{KafkaCluster, Topic};

use crate::cluster_controllers::ClusterController;
use crate::context::Context;
use crate::error::{Error, Result};
use crate::manifests::{ClusterNames, ClusterObjects};
use crate::reconcile::balance::BalanceStep;
use crate::reconcile::brokers::Progress;
use crate::reconcile::desired_cluster::DesiredCluster;
use crate::reconcile::features::FeatureStep;
use crate::reconcile::publish;
use crate::reconcile::storage::VolumeReport;
use crate::status::ClusterStatusPatch;

/// Requeue while brokers are still coming up.
pub const REQUEUE_NOT_READY: Duration = Duration::from_secs(10);
/// Re-check while a drain, a replica move or a rolling restart runs.
pub const REQUEUE_PROGRESS: Duration = Duration::from_secs(3);
/// Periodic re-check once everything is ready.
pub const REQUEUE_READY: Duration = Duration::from_secs(300);
/// Re-check of a refusal whose cause is not watched (a Secret in the way).
pub const REQUEUE_REFUSED: Duration = Duration::from_secs(30);

/// What a step tells the reconcile.
#[derive(Debug, PartialEq)]
pub enum Outcome {
    /// Go on with the next step.
    Continue,
    /// Stop here and come back as the action says (a refused spec).
    Done(Action),
}

/// The reconcile's fixed inputs.
pub struct Cx<'a> {
    pub ctx: &'a Context,
    pub kc: &'a KafkaCluster,
    pub ns: String,
    pub name: String,
    /// The reconcile's clock (tests fix it).
    pub now: Time,
    /// `spec.replicas` and what follows from it.
    pub desired: DesiredCluster,
    pub names: ClusterNames,
    pub clusters: Api<KafkaCluster>,
}

impl<'a> Cx<'a> {
    /// The inputs of a reconcile of `kc`, which must be namespaced.
    pub fn new(kc: &'a KafkaCluster, ctx: &'a Context, now: Time) -> Result<Self> {
        let ns = kc.namespace().ok_or(Error::NotNamespaced)?;
        Ok(Cx {
            ctx,
            kc,
            clusters: Api::namespaced(ctx.client.clone(), &ns),
            ns,
            name: kc.name_any(),
            now,
            desired: DesiredCluster::of(kc),
            names: ClusterNames::of(kc),
        })
    }

    /// The generation the status last reported on.
    pub fn observed_generation(&self) -> Option<i64> {
        self.kc.status.as_ref().and_then(|s| s.observed_generation)
    }

    /// Whether this generation of the spec has not been reported yet (its
    /// Events are sent once).
    pub fn generation_is_new(&self) -> bool {
        self.observed_generation() != self.kc.metadata.generation
    }

    /// Publishes an Event about the KafkaCluster.
    pub async fn publish(&self, type_: EventType, reason: &str, action: &str, note: String) {
        publish(self.ctx, self.kc, type_, reason, action, note).await;
    }
}

/// What the steps found and decided so far. A step that needs what an
/// earlier one found (the built objects, the applied StatefulSet) panics
/// when run before it: the order of `STEPS` is fixed.
#[derive(Default)]
pub struct Found {
    /// The Topics of this cluster (a scale-down must fit them).
    pub topics: Vec<Topic>,
    /// The cluster's controller, when one runs (kubernetes platform).
    pub controller: Option<Arc<ClusterController>>,
    /// The external listeners' Services as applied.
    pub listener_services: Vec<Service>,
    /// The addresses of the nodes the brokers run on.
    pub node_addresses: Vec<String>,
    /// The listener certificates: CA statuses and when to look again.
    pub certificates: crate::listener_tls::Outcome,
    /// Every object of the cluster, built.
    pub objects: Option<ClusterObjects>,
    /// The StatefulSet before this reconcile's apply.
    pub current_sts: Option<StatefulSet>,
    /// The size of the existing claim template (kept: it cannot change).
    pub template: Option<Quantity>,
    /// The StatefulSet as the API server returned it from the apply.
    pub applied_sts: Option<StatefulSet>,
    /// A drain, replica move, roll or feature level in progress.
    pub progress: Option<Progress>,
    /// The rolling restart: its status, an image roll undone, the image
    /// every broker runs once none is left.
    pub roll: crate::reconcile::roll::RollStep,
    /// The volumes' growth.
    pub volumes: Option<VolumeReport>,
    /// The feature level step (when a controller runs).
    pub features: Option<FeatureStep>,
    /// The balancer: its plan, condition, Event and requeue.
    pub balance: BalanceStep,
    /// What the controller knew when the status was built.
    pub observed: Option<Observed>,
    /// Unclean recoveries the controller made since the last reconcile
    /// (for the status and an Event each).
    pub recoveries: Vec<skein_controller::unclean_recovery::RecoveryNote>,
    /// The status written.
    pub status: Option<ClusterStatusPatch>,
}

impl Found {
    /// Every broker of the spec ready (as the status written says) and
    /// nothing in progress.
    pub fn all_ready(&self, desired: &DesiredCluster) -> bool {
        let ready = self.status.as_ref().map_or(0, |s| s.ready_replicas);
        ready >= desired.replicas && self.progress.is_none()
    }
}

/// The cluster's controller's view, taken once for the status.
pub struct Observed {
    pub view: Arc<skein_controller::ClusterView>,
    /// Since when each lost broker has been gone (the controller's clock).
    pub lost_since: BTreeMap<i32, u64>,
    /// The same clock now (Unix milliseconds).
    pub now_ms: u64,
}
