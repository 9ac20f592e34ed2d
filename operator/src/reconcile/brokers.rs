//! What the KafkaCluster reconciler does about the broker set when the
//! cluster's controller runs (kubernetes platform):
//!
//! - **Scale-down** drains first: replicas on the leaving brokers (the
//!   highest ordinals) are reassigned to the staying ones, and the
//!   StatefulSet keeps its old size until no partition uses a leaving broker.
//! - **Scale-up** fills: once every new broker has registered and one of them
//!   hosts nothing, replicas are moved onto the new brokers until the counts
//!   are even.
//! - **Rolling restart** (`updateStrategy: OnDelete`): when the pod template
//!   changed, one outdated pod at a time is deleted, highest ordinal first,
//!   only while every broker is up and no partition is under-replicated, and
//!   never when a partition the broker is in sync for would drop below its
//!   `min.insync.replicas` (the broker moves its leadership away on SIGTERM).

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams};
use kube::ResourceExt;
use skein_controller::requests as req;
use skein_controller::Call;
use skein_crds::KafkaCluster;
use tracing::{info, warn};

use crate::cluster_controllers::{ClusterController, Restart};
use crate::error::{Error, Result};
use crate::manifests::{selector_string, ClusterNames};
use crate::reconcile::desired_cluster::DesiredCluster;
use skein_controller::scaling::{
    assignment, plan_per_topic, plan_per_topic_onto, uses_any_outside, Assignment,
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
            let moves = plan_per_topic_onto(&asg, &staying, &hosts);
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
        let moves = plan_per_topic(&asg, &all);
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

fn ordinal(pod: &Pod) -> i32 {
    pod.name_any()
        .rsplit('-')
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(-1)
}

fn is_ready(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none()
        && pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// One step of a rolling restart: deletes at most one outdated pod.
pub async fn rolling_restart_step(
    client: &kube::Client,
    rt: &ClusterController,
    kc: &KafkaCluster,
    desired: &DesiredCluster,
    sts: &StatefulSet,
    filesystem: &[(i32, Option<k8s_openapi::jiff::Timestamp>)],
) -> Result<Option<Progress>> {
    let Some(update) = sts.status.as_ref().and_then(|s| s.update_revision.clone()) else {
        return Ok(None);
    };
    // Until the StatefulSet controller has seen the latest template, its
    // update revision is the one before: a pod deleted now comes back on
    // the old template, its broker registers again, and the roll would
    // take that for the restart it asked for and go on to the next pod
    // (with an image that cannot start, two brokers down).
    let observed = sts.status.as_ref().and_then(|s| s.observed_generation);
    if observed < sts.metadata.generation {
        return Ok(Some(Progress {
            reason: "RollingRestart",
            message: "waiting for the StatefulSet controller to take the new pod template".into(),
        }));
    }
    let names = ClusterNames::of(kc);
    let pods_api: Api<Pod> = Api::namespaced(client.clone(), &names.namespace);
    let pods = pods_api
        .list(&ListParams::default().labels(&selector_string(&names)))
        .await
        .map_err(|source| Error::Dereference {
            what: "pods",
            source,
        })?
        .items;
    // Pods on an old revision, and pods started before their volume grew
    // whose filesystem waits for a restart.
    let grows_on_restart = |p: &Pod| {
        filesystem.iter().any(|(o, since)| {
            *o == ordinal(p)
                && match (since, p.status.as_ref().and_then(|s| s.start_time.as_ref())) {
                    (Some(since), Some(started)) => started.0 < *since,
                    _ => true,
                }
        })
    };
    let is_outdated = |p: &Pod| {
        p.labels().get("controller-revision-hash") != Some(&update) || grows_on_restart(p)
    };
    let mut outdated: Vec<&Pod> = pods.iter().filter(|p| is_outdated(p)).collect();
    let view = rt.controller.view();
    let brokers = rt.controller.brokers();
    // A pod on an old revision whose broker is not in session serves
    // nothing: restarting it costs no availability. That is how a roll to an
    // image whose broker cannot start is undone: the image is set back while
    // the pod restarted last crash-loops, and that pod goes first, without
    // waiting for its broker (it never comes) or for the cluster's health.
    let serves_nothing =
        |p: &Pod| is_outdated(p) && !view.brokers.get(&ordinal(p)).is_some_and(|b| b.alive);
    // One at a time: the pod restarted last must be back, and its broker
    // registered again, before anything else is looked at.
    let last = rt.restarting.lock().expect("restarting lock").clone();
    if let Some(r) = last {
        let new_pod = pods
            .iter()
            .find(|p| p.name_any() == r.pod && p.uid().as_deref() != Some(r.uid.as_str()));
        // Back on the template the roll is for: a pod recreated on an older
        // one is no restart done (it is restarted again below, as any pod
        // on an old revision).
        let pod_back = new_pod.is_some_and(|p| is_ready(p) && !is_outdated(p));
        let broker_back = brokers.get(&r.broker).is_some_and(|b| {
            b.broker_epoch > r.broker_epoch && !b.fenced && !b.in_controlled_shutdown
        });
        let left_behind =
            new_pod.is_some_and(is_outdated) || !broker_back && new_pod.is_some_and(serves_nothing);
        if !(left_behind || pod_back && broker_back) {
            // A broker whose release cannot run at the finalized feature
            // level is refused at registration: say so, not just "waiting".
            let message = match rt.controller.refused_registration(r.broker) {
                Some(why) => format!(
                    "holding the roll at {}: its broker was refused at registration ({why}); set spec.image back to a release that supports the cluster's feature level",
                    r.pod
                ),
                None => format!(
                    "waiting for {} to be recreated and its broker to register again",
                    r.pod
                ),
            };
            return Ok(Some(Progress {
                reason: "RollingRestart",
                message,
            }));
        }
        *rt.restarting.lock().expect("restarting lock") = None;
    }
    if outdated.is_empty() {
        return Ok(None);
    }
    let wait = |message: String| {
        Ok(Some(Progress {
            reason: "RollingRestart",
            message,
        }))
    };
    let left = outdated.len() - 1;
    let restart = |victim: &Pod| {
        let pod = victim.name_any();
        let id = ordinal(victim);
        *rt.restarting.lock().expect("restarting lock") = Some(Restart {
            pod: pod.clone(),
            uid: victim.uid().unwrap_or_default(),
            broker: id,
            broker_epoch: brokers.get(&id).map_or(0, |b| b.broker_epoch),
        });
        let pods_api = pods_api.clone();
        let cluster = names.cluster.clone();
        async move {
            pods_api
                .delete(&pod, &DeleteParams::default())
                .await
                .map_err(|source| Error::Apply {
                    kind: "Pod".into(),
                    name: pod.clone(),
                    source,
                })?;
            info!(%cluster, %pod, "rolling restart: pod deleted");
            Ok(Some(Progress {
                reason: "RollingRestart",
                message: format!("restarting {pod}; {left} pod(s) left on an old revision"),
            }))
        }
    };
    outdated.sort_by_key(|p| (!serves_nothing(p), -ordinal(p)));
    let victim = outdated[0];
    let id = ordinal(victim);
    if serves_nothing(victim) {
        return restart(victim).await;
    }

    let want = desired.replicas;
    let ready = pods.iter().filter(|p| is_ready(p)).count() as i32;
    let alive = (0..want).all(|b| view.brokers.get(&b).is_some_and(|m| m.alive));
    let under = view.partition_health().under_replicated;
    if ready < want || !alive || under > 0 {
        return wait(format!(
            "{} pod(s) on an old revision; next is {} once every broker is up and in sync ({ready}/{want} pods ready, {under} partition(s) under-replicated)",
            outdated.len(),
            victim.name_any()
        ));
    }
    let cluster_min = kc
        .spec
        .config
        .get(skein_controller::election::MIN_INSYNC_REPLICAS)
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(1);
    for (name, t) in &view.topics {
        let min = t
            .configs
            .get(skein_controller::election::MIN_INSYNC_REPLICAS)
            .and_then(|v| v.parse::<usize>().ok())
            .unwrap_or(cluster_min);
        for (i, p) in t.partitions.iter().enumerate() {
            if p.isr.contains(&id) && p.isr.len() <= min && p.replicas.len() > 1 {
                return Ok(Some(Progress {
                    reason: "RollingRestartBlocked",
                    message: format!(
                        "restarting {} would leave {name}-{i} with {} in-sync replica(s), below min.insync.replicas={min}",
                        victim.name_any(),
                        p.isr.len() - 1
                    ),
                }));
            }
        }
    }
    restart(victim).await
}
