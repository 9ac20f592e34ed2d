//! Rolling restarts (`updateStrategy: OnDelete`): when the pod template
//! changed (config, image, certificates) or a volume grows only offline,
//! one outdated pod at a time is deleted, highest ordinal first (the broker
//! moves its leadership away on SIGTERM), paced by the cluster's recovery
//! (`spec.rollPolicy`):
//!
//! - the pod restarted last must be back on the new template, **ready**
//!   (its `/readyz`: in session with the controller and in the ISR of every
//!   partition it follows) and its broker registered again: a broker that
//!   takes ten minutes to catch up holds the roll for ten minutes;
//! - every broker is up, and no partition is under its replication factor
//!   (`waitForFullReplication`, the default) or under its
//!   `min.insync.replicas`;
//! - the next broker is never one whose restart would take a partition it
//!   is in sync for below `min.insync.replicas`.
//!
//! A restarted broker not ready within `spec.rollPolicy.timeout` holds the
//! roll and says so; when the roll is to a new image, it is undone: the
//! brokers go back to the image they all ran before (`status.brokerImage`),
//! the pods on the failed image first, without waiting for the cluster's
//! health (they serve nothing), and the status and an Event say why.

use std::time::Duration;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, DeleteParams, ListParams};
use kube::ResourceExt;
use skein_crds::{ImageRollbackStatus, KafkaCluster, RollStatus};
use tracing::{info, warn};

use crate::cluster_controllers::{ClusterController, Restart};
use crate::error::{Error, Result};
use crate::manifests::{selector_string, ClusterNames};
use crate::reconcile::brokers::Progress;
use crate::reconcile::desired_cluster::DesiredCluster;

/// `spec.rollPolicy.timeout` when it cannot be read (the schema refuses
/// such values; an object written before it had the field).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1800);

/// What one step of a roll did or waits for.
#[derive(Debug, Default)]
pub struct RollStep {
    pub progress: Option<Progress>,
    /// `status.roll` while a roll runs.
    pub status: Option<RollStatus>,
    /// A roll to a new image undone by this step.
    pub rollback: Option<ImageRollbackStatus>,
    /// The image every broker runs, ready, when no roll is left to do.
    pub settled_image: Option<String>,
}

impl RollStep {
    fn progress(reason: &'static str, message: String) -> Self {
        RollStep {
            progress: Some(Progress { reason, message }),
            ..RollStep::default()
        }
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

fn image_of(pod: &Pod) -> Option<&str> {
    pod.spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .and_then(|c| c.image.as_deref())
}

/// The broker image of the StatefulSet's template.
fn template_image(sts: &StatefulSet) -> Option<String> {
    sts.spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .and_then(|s| s.containers.first())
        .and_then(|c| c.image.clone())
}

fn human(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..=119 => format!("{s}s"),
        _ => format!("{}m{}s", s / 60, s % 60),
    }
}

/// The `min.insync.replicas` of each partition: its topic's, else the
/// cluster's (`spec.config`), else 1.
pub(crate) fn min_isr(
    kc: &KafkaCluster,
    configs: &std::collections::BTreeMap<String, String>,
) -> usize {
    let key = skein_controller::election::MIN_INSYNC_REPLICAS;
    configs
        .get(key)
        .or_else(|| kc.spec.config.get(key))
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(1)
}

/// One step of a rolling restart: deletes at most one outdated pod.
pub async fn rolling_restart_step(
    client: &kube::Client,
    rt: &ClusterController,
    kc: &KafkaCluster,
    desired: &DesiredCluster,
    sts: &StatefulSet,
    filesystem: &[(i32, Option<k8s_openapi::jiff::Timestamp>)],
    now: Time,
) -> Result<RollStep> {
    let Some(update) = sts.status.as_ref().and_then(|s| s.update_revision.clone()) else {
        return Ok(RollStep::default());
    };
    // Until the StatefulSet controller has seen the latest template, its
    // update revision is the one before: a pod deleted now comes back on
    // the old template, its broker registers again, and the roll would
    // take that for the restart it asked for and go on to the next pod
    // (with an image that cannot start, two brokers down).
    let observed = sts.status.as_ref().and_then(|s| s.observed_generation);
    if observed < sts.metadata.generation {
        return Ok(RollStep::progress(
            "RollingRestart",
            "waiting for the StatefulSet controller to take the new pod template".into(),
        ));
    }
    let image = template_image(sts).unwrap_or_default();
    let policy = &kc.spec.roll_policy;
    let timeout = policy
        .timeout_seconds()
        .map_or(DEFAULT_TIMEOUT, Duration::from_secs);
    let status = kc.status.as_ref();
    let settled_image = status.and_then(|s| s.broker_image.clone());
    // Pods left on an image whose roll was undone serve nothing worth
    // waiting for: they go first.
    let failed_image = status
        .and_then(|s| s.image_rollback.as_ref())
        .map(|r| r.failed_image.clone())
        .filter(|f| *f != image);
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
    let updated = (pods.len() - outdated.len()) as i32;
    let view = rt.controller.view();
    let brokers = rt.controller.brokers();
    // A pod on an old revision whose broker is not in session serves
    // nothing: restarting it costs no availability. That is how a roll to an
    // image whose broker cannot start is undone: the image is set back while
    // the pod restarted last crash-loops, and that pod goes first, without
    // waiting for its broker (it never comes) or for the cluster's health.
    let serves_nothing = |p: &Pod| {
        is_outdated(p)
            && (!view.brokers.get(&ordinal(p)).is_some_and(|b| b.alive)
                || failed_image.is_some() && image_of(p) == failed_image.as_deref())
    };
    let roll_status = |pod: Option<&Restart>, waiting_for: &str| RollStatus {
        progress: format!("{updated}/{}", pods.len()),
        updated_replicas: updated,
        replicas: pods.len() as i32,
        pod: pod.map(|r| r.pod.clone()),
        restarted_at: pod.map(|r| r.restarted_at.clone()),
        pod_uid: pod.map(|r| r.uid.clone()),
        broker_epoch: pod.map(|r| r.broker_epoch as i64),
        image: pod.map(|r| r.image.clone()),
        waiting_for: waiting_for.to_string(),
    };
    let step = |reason: &'static str, message: String, pod: Option<&Restart>| RollStep {
        status: Some(roll_status(pod, &message)),
        progress: Some(Progress { reason, message }),
        ..RollStep::default()
    };
    // One at a time: the pod restarted last must be back, ready, and its
    // broker registered again, before anything else is looked at.
    // An operator that took over (a failover) finds the record in the status.
    // (The lock is taken and released before: the closure takes it again.)
    let recorded = rt.restarting.lock().expect("restarting lock").clone();
    let last = recorded.or_else(|| {
        let r = Restart::from_status(status?.roll.as_ref()?, &now)?;
        info!(cluster = %names.cluster, pod = %r.pod, since = %r.restarted_at.0,
            "rolling restart: going on waiting for the pod the previous operator restarted");
        *rt.restarting.lock().expect("restarting lock") = Some(r.clone());
        Some(r)
    });
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
            let waited = r.since.elapsed();
            // A broker whose release cannot run at the finalized feature
            // level is refused at registration: say so, not just "waiting".
            let refused = rt.controller.refused_registration(r.broker);
            let why = match (&refused, broker_back) {
                (Some(why), _) => format!("its broker was refused at registration ({why})"),
                (None, false) => "its broker has not registered again".to_string(),
                (None, true) => {
                    "it is not ready: its broker is catching up on the partitions it follows"
                        .to_string()
                }
            };
            if waited > timeout {
                let image_roll = settled_image.as_ref().is_some_and(|good| *good != r.image);
                if let (true, Some(good)) = (image_roll && r.image == image, &settled_image) {
                    *rt.restarting.lock().expect("restarting lock") = None;
                    let message = format!(
                        "the roll to {} was undone: {} was not ready {} after its restart ({why}; spec.rollPolicy.timeout {}); the brokers go back to {good}. Set spec.image to another image to try again",
                        r.image,
                        r.pod,
                        human(waited),
                        policy.timeout
                    );
                    warn!(cluster = %names.cluster, pod = %r.pod, image = %r.image, "{message}");
                    return Ok(RollStep {
                        status: Some(roll_status(None, &message)),
                        progress: Some(Progress {
                            reason: "RollingBack",
                            message: message.clone(),
                        }),
                        rollback: Some(ImageRollbackStatus {
                            failed_image: r.image.clone(),
                            restored_image: good.clone(),
                            pod: r.pod.clone(),
                            time: now,
                            message,
                        }),
                        settled_image: None,
                    });
                }
                return Ok(step(
                    "RollingRestartStalled",
                    format!(
                        "holding the roll at {}: not ready {} after its restart, longer than spec.rollPolicy.timeout {} ({why})",
                        r.pod,
                        human(waited),
                        policy.timeout
                    ),
                    Some(&r),
                ));
            }
            let message = match refused {
                Some(why) => format!(
                    "holding the roll at {}: its broker was refused at registration ({why}); set spec.image back to a release that supports the cluster's feature level",
                    r.pod
                ),
                None => format!(
                    "waiting for {} to be recreated, ready and its broker registered again ({} since its restart; {why})",
                    r.pod,
                    human(waited)
                ),
            };
            return Ok(step("RollingRestart", message, Some(&r)));
        }
        if pod_back && broker_back {
            info!(cluster = %names.cluster, pod = %r.pod, waited = %human(r.since.elapsed()), "rolling restart: pod ready again");
        }
        *rt.restarting.lock().expect("restarting lock") = None;
    }
    if outdated.is_empty() {
        let all_ready = pods.len() as i32 >= desired.replicas && pods.iter().all(is_ready);
        return Ok(RollStep {
            settled_image: all_ready.then_some(image),
            ..RollStep::default()
        });
    }
    let left = outdated.len() - 1;
    let restart = |victim: &Pod| {
        let pod = victim.name_any();
        let id = ordinal(victim);
        let record = Restart {
            pod: pod.clone(),
            uid: victim.uid().unwrap_or_default(),
            broker: id,
            broker_epoch: brokers.get(&id).map_or(0, |b| b.broker_epoch),
            since: std::time::Instant::now(),
            restarted_at: now.clone(),
            image: image.clone(),
        };
        *rt.restarting.lock().expect("restarting lock") = Some(record.clone());
        let pods_api = pods_api.clone();
        let cluster = names.cluster.clone();
        let message = format!("restarting {pod}; {left} pod(s) left on an old revision");
        let status = roll_status(Some(&record), &message);
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
            Ok(RollStep {
                progress: Some(Progress {
                    reason: "RollingRestart",
                    message,
                }),
                status: Some(status),
                ..RollStep::default()
            })
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
    let under_min: usize = view
        .topics
        .values()
        .map(|t| {
            let min = min_isr(kc, &t.configs);
            t.partitions
                .iter()
                .filter(|p| p.isr.len() < min.min(p.replicas.len()))
                .count()
        })
        .sum();
    let held_by_replication = policy.wait_for_full_replication && under > 0;
    if ready < want || !alive || held_by_replication || under_min > 0 {
        return Ok(step(
            "RollingRestart",
            format!(
                "{} pod(s) on an old revision; next is {} once every broker is up and ready and the partitions are in sync ({ready}/{want} pods ready, {under} partition(s) under-replicated, {under_min} under min.insync.replicas{})",
                outdated.len(),
                victim.name_any(),
                if policy.wait_for_full_replication { "" } else { "; spec.rollPolicy.waitForFullReplication is off" }
            ),
            None,
        ));
    }
    for (name, t) in &view.topics {
        let min = min_isr(kc, &t.configs);
        for (i, p) in t.partitions.iter().enumerate() {
            if p.isr.contains(&id) && p.isr.len() <= min && p.replicas.len() > 1 {
                return Ok(step(
                    "RollingRestartBlocked",
                    format!(
                        "restarting {} would leave {name}-{i} with {} in-sync replica(s), below min.insync.replicas={min}",
                        victim.name_any(),
                        p.isr.len() - 1
                    ),
                    None,
                ));
            }
        }
    }
    restart(victim).await
}

/// Why the cluster cannot lose one more broker now (`None`: it can): a
/// partition whose ISR is at its `min.insync.replicas`, so that losing a
/// member stops its acks=all writes. The PodDisruptionBudget allows no
/// eviction meanwhile; an unready broker (out of an ISR) already counts
/// against it.
pub fn cannot_spare_a_broker(
    view: &skein_controller::ClusterView,
    kc: &KafkaCluster,
) -> Option<String> {
    for (name, t) in &view.topics {
        let min = min_isr(kc, &t.configs);
        for (i, p) in t.partitions.iter().enumerate() {
            if p.leader >= 0 && p.replicas.len() > 1 && p.isr.len() <= min {
                return Some(format!(
                    "{name}-{i} has {} in-sync replica(s), at min.insync.replicas={min}",
                    p.isr.len()
                ));
            }
        }
    }
    None
}
