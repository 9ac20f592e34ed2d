//! What the KafkaCluster reconciler does about the broker set when the
//! cluster's controller runs (kubernetes platform):
//!
//! - **Scale-down** drains first: replicas on the leaving brokers (the
//!   highest ordinals) are reassigned to the staying ones, and the
//!   StatefulSet keeps its old size until no partition uses a leaving broker.
//! - **Scale-up** fills: once every new broker has registered and one of them
//!   hosts nothing, replicas are moved onto the new brokers until the counts
//!   are even.
//!
//! Rolling restarts are in [`super::roll`].

use kube::ResourceExt;
use skein_controller::requests as req;
use skein_controller::Call;
use skein_crds::KafkaCluster;
use tracing::{info, warn};

use crate::cluster_controllers::ClusterController;
use crate::reconcile::desired_cluster::DesiredCluster;
use skein_controller::scaling::{
    assignment, plan_per_topic_racks, uses_any_outside, Assignment, Racks,
};

/// Why the cluster is still converging, for the `Reconciling` condition.
#[derive(Clone, Debug, PartialEq)]
pub struct Progress {
    pub reason: &'static str,
    pub message: String,
}

/// The StatefulSet size to apply now, and what is in progress.
pub struct ScaleStep {
    pub replicas: i32,
    pub progress: Option<Progress>,
}

fn reassigning(rt: &ClusterController) -> usize {
    rt.controller.view().partition_health().reassigning
}

pub(super) fn reassign(rt: &ClusterController, moves: &Assignment) -> usize {
    let mut started = 0;
    for ((topic, partition), target) in moves {
        let r = rt.controller.call(req::ReassignPartition {
            topic: topic.clone(),
            partition: *partition as u32,
            target: Some(target.clone()),
            throttled: true,
        });
        match r {
            Ok(()) => started += 1,
            Err(e) => warn!(topic, partition, error = %e, "reassignment refused"),
        }
    }
    started
}

/// Each broker's rack (`broker.rack`: its zone, with `spec.rack`).
fn racks(view: &skein_controller::ClusterView) -> Racks {
    view.brokers
        .iter()
        .map(|(id, b)| (*id, b.rack.clone()))
        .collect()
}

/// Decides the StatefulSet size: the spec's, except while a scale-down is
/// still moving replicas off the leaving brokers.
pub fn scale_step(
    rt: &ClusterController,
    kc: &KafkaCluster,
    desired: &DesiredCluster,
    current: Option<i32>,
) -> ScaleStep {
    let want = desired.replicas;
    let cur = current.unwrap_or(want);
    let view = rt.controller.view();
    let asg = assignment(&view);
    let moving = reassigning(rt);
    if want < cur {
        let staying: Vec<i32> = (0..want).collect();
        if !uses_any_outside(&asg, &staying) && moving == 0 {
            return ScaleStep {
                replicas: want,
                progress: None,
            };
        }
        if moving == 0 {
            // Only live brokers take the drained replicas (a staying broker
            // that is gone would never catch up).
            let hosts: Vec<i32> = staying
                .iter()
                .filter(|b| view.is_alive(**b))
                .copied()
                .collect();
            let moves = plan_per_topic_racks(&asg, &staying, &hosts, &racks(&view));
            let n = reassign(rt, &moves);
            info!(cluster = %kc.name_any(), partitions = n, "draining brokers {want}..{cur}");
        }
        return ScaleStep {
            replicas: cur,
            progress: Some(Progress {
                reason: "DrainingBrokers",
                message: format!(
                    "moving replicas off broker(s) {want}..{} before the StatefulSet shrinks to {want}; {} partition(s) moving",
                    cur - 1,
                    reassigning(rt)
                ),
            }),
        };
    }
    let all: Vec<i32> = (0..want).collect();
    let alive = all
        .iter()
        .all(|b| view.brokers.get(b).is_some_and(|m| m.alive));
    let empty_broker = all.iter().any(|b| !asg.values().any(|r| r.contains(b)));
    // With the balancer on, it spreads replicas onto new or returning
    // brokers (by bytes, with a plan shown first).
    if moving == 0 && alive && empty_broker && !asg.is_empty() && !kc.spec.balancer.enabled {
        let moves = plan_per_topic_racks(&asg, &all, &all, &racks(&view));
        if !moves.is_empty() {
            let n = reassign(rt, &moves);
            info!(cluster = %kc.name_any(), partitions = n, "moving replicas onto new brokers");
        }
    }
    let moving = reassigning(rt);
    let progress = (moving > 0).then(|| Progress {
        reason: "MovingReplicas",
        message: format!("{moving} partition(s) moving between brokers"),
    });
    ScaleStep {
        replicas: want,
        progress,
    }
}
