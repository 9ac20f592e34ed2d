//! The steps that report: what the controller knows, the status (built in
//! one place, [`cluster_status`], from what the steps found), the Events
//! after it, and when to come back ([`requeue`]).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use skein_crds::{BrokerStatus, KafkaCluster};
use tracing::info;

use super::state::{
    Cx, Found, Observed, Outcome, REQUEUE_NOT_READY, REQUEUE_PROGRESS, REQUEUE_READY,
};
use crate::error::Result;
use crate::manifests::ClusterNames;
use crate::reconcile::desired_cluster::DesiredCluster;
use crate::reconcile::roll::RollStep;
use crate::reconcile::{patch_status, storage};
use crate::status::{self, ClusterStatusPatch};

/// Takes the controller's view (and its lost brokers' clock) for the
/// status, and counts the pods a rolling restart has left to do.
pub async fn observe(cx: &Cx<'_>, found: &mut Found) -> Result<Outcome> {
    found.observed = found.controller.as_ref().map(|rt| Observed {
        view: rt.controller.view(),
        lost_since: rt.controller.lost_since(),
        now_ms: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64),
    });
    found.recoveries = found
        .controller
        .as_ref()
        .map(|c| c.controller.take_recoveries())
        .unwrap_or_default();
    // Rolling restart progress: pods not yet on the newest revision.
    let sts = found.applied_sts.as_ref().and_then(|s| s.status.as_ref());
    let pending = sts.map_or(0, |s| {
        if s.update_revision.is_some() && s.update_revision != s.current_revision {
            (s.replicas as i64 - s.updated_replicas.unwrap_or(0) as i64).max(0)
        } else {
            0
        }
    });
    cx.ctx
        .metrics
        .rolling_pending
        .with_label_values(&[cx.ns.as_str(), cx.name.as_str()])
        .set(pending);
    Ok(Outcome::Continue)
}

/// Writes the status built from what the steps found.
pub async fn write_status(cx: &Cx<'_>, found: &mut Found) -> Result<Outcome> {
    let patch = cluster_status(
        cx.kc,
        &cx.names,
        &cx.desired,
        found,
        &cx.ctx.options.default_broker_image,
        cx.now.clone(),
    );
    patch_status(&cx.clusters, &cx.name, &patch).await?;
    found.status = Some(patch);
    Ok(Outcome::Continue)
}

/// The status of an applied cluster: from what the API server returned for
/// the StatefulSet, then what each step contributed.
pub fn cluster_status(
    kc: &KafkaCluster,
    names: &ClusterNames,
    desired: &DesiredCluster,
    found: &Found,
    default_image: &str,
    now: Time,
) -> ClusterStatusPatch {
    let sts = found.applied_sts.as_ref().and_then(|s| s.status.as_ref());
    let mut new_status = status::cluster_applied(kc, desired, sts, now.clone());
    if let Some(o) = &found.observed {
        status::add_controller_view(&mut new_status, kc, desired, &o.view, now.clone());
        status::set_self_healing(
            &mut new_status,
            kc,
            desired,
            &o.view,
            &o.lost_since,
            o.now_ms,
            now.clone(),
        );
    }
    new_status.listeners = crate::manifests::listeners::statuses(
        kc,
        names,
        &found.listener_services,
        &found.node_addresses,
    );
    // A CA's phase in the status also wakes the KafkaUsers of the cluster
    // (they watch it): a new clients CA gives them new certificates.
    new_status.certificate_authorities = found.certificates.statuses.clone();
    if let Some(p) = &found.progress {
        status::set_progress(&mut new_status, kc, p.reason, &p.message, now.clone());
    }
    if let Some(report) = &found.volumes {
        status::set_volumes(&mut new_status, kc, report, now.clone());
    }
    if let Some(f) = &found.features {
        status::set_feature_level(
            &mut new_status,
            kc,
            f.finalized,
            f.blocked.as_deref(),
            now.clone(),
        );
    }
    new_status.unclean_recoveries = status::unclean_recoveries(kc, &found.recoveries, now.clone());
    set_roll(&mut new_status, kc, &found.roll, default_image);
    let balance = &found.balance;
    new_status.balance = balance.status.clone();
    if let Some((balanced, reason, message)) = &balance.condition {
        status::set_balanced(&mut new_status, kc, *balanced, reason, message, now);
    } else if let Some(c) = kc
        .status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Balanced"))
        .filter(|_| kc.spec.balancer.enabled)
    {
        // Said before and nothing new: kept (this patch owns the list). With
        // the balancer off the condition goes.
        new_status.conditions.push(c.clone());
    }
    new_status
}

/// The roll's part of the status: its progress; the image every broker
/// runs (kept from the last write until a roll settles on another); an
/// image roll undone, kept while `spec.image` names the failed image.
fn set_roll(
    new_status: &mut ClusterStatusPatch,
    kc: &KafkaCluster,
    roll: &RollStep,
    default_image: &str,
) {
    let before = kc.status.as_ref();
    new_status.roll = roll.status.clone();
    new_status.broker_image = roll
        .settled_image
        .clone()
        .or_else(|| before.and_then(|s| s.broker_image.clone()));
    new_status.image_rollback = roll
        .rollback
        .clone()
        .or_else(|| kc.image_rollback_in_effect(default_image).cloned());
}

/// Events for brokers that came back on an empty disk (counted by the
/// controller, so a loss is reported even when the copy back finished
/// before this reconcile), and when they have copied everything back; for
/// the controller's unclean recoveries; the balancer's; and one per new
/// generation, saying what was done.
pub async fn events(cx: &Cx<'_>, found: &mut Found) -> Result<Outcome> {
    let kc = cx.kc;
    let brokers_of = |brokers: Option<&Vec<BrokerStatus>>| {
        brokers
            .into_iter()
            .flatten()
            .map(|b| (b.id, b.clone()))
            .collect::<BTreeMap<i32, BrokerStatus>>()
    };
    let before = brokers_of(kc.status.as_ref().map(|s| &s.brokers));
    let after = brokers_of(found.status.as_ref().and_then(|s| s.brokers.as_ref()));
    let losses = |b: Option<&BrokerStatus>| b.and_then(|b| b.storage_losses).unwrap_or(0);
    let recovering = |b: Option<&BrokerStatus>| b.is_some_and(|b| b.replicas_to_recover.is_some());
    for (id, b) in &after {
        let was = before.get(id);
        if losses(Some(b)) > losses(was) {
            let progress = match b.replicas_to_recover {
                Some(0) | None => "every replica is in sync again".to_string(),
                Some(n) => format!("{n} replicas are still being copied back from their leaders"),
            };
            cx.publish(
                EventType::Warning,
                "BrokerStorageLost",
                "Recover",
                format!("broker {id} came back with an empty log directory (lost disk or new volume): its replicas left their ISRs, lead nothing, and are copied back; {progress}"),
            )
            .await;
        }
        if (recovering(was) || losses(Some(b)) > losses(was)) && !recovering(Some(b)) {
            cx.publish(
                EventType::Normal,
                "BrokerStorageRecovered",
                "Recover",
                format!("broker {id} has copied every replica back and is in sync again"),
            )
            .await;
        }
    }

    // Unclean recoveries (KIP-966): a partition had no in-sync or eligible
    // replica left and the controller elected the longest log; the note
    // names the offsets that may be lost.
    for r in std::mem::take(&mut found.recoveries) {
        cx.publish(
            EventType::Warning,
            "UncleanRecovery",
            "Elect",
            r.to_string(),
        )
        .await;
    }

    if let Some((reason, note)) = found.balance.event.take() {
        cx.publish(EventType::Normal, reason, "Balance", note).await;
    }

    if cx.generation_is_new() {
        let want = cx.desired.replicas;
        let previous = kc.status.as_ref().map(|s| s.replicas);
        let note = match previous {
            Some(p) if p != 0 && p != want => format!(
                "applied ConfigMap, Services, ServiceAccount, PodDisruptionBudget and StatefulSet; scaled from {p} to {want} brokers"
            ),
            _ => format!(
                "applied ConfigMap, Services, ServiceAccount, PodDisruptionBudget and StatefulSet with {want} brokers"
            ),
        };
        info!(cluster = %cx.name, namespace = %cx.ns, "{note}");
        cx.publish(EventType::Normal, "Applied", "Reconcile", note)
            .await;
    }
    let all_ready = found.all_ready(&cx.desired);
    tracing::debug!(statefulset = %cx.names.statefulset(), all_ready, "reconciled");
    Ok(Outcome::Continue)
}

/// When to come back once every step continued: soon while something is in
/// progress or the volumes grow, later once every broker is ready; sooner
/// when a CA replacement's phase ends, the balancer's plan is due, or the
/// control plane's certificates are due for renewal.
pub fn requeue(desired: &DesiredCluster, found: &Found) -> Action {
    let all_ready = found.all_ready(desired);
    let resizing = matches!(found.volumes, Some(storage::VolumeReport::Resizing { .. }));
    let requeue = if found.progress.is_some() || resizing {
        REQUEUE_PROGRESS
    } else if all_ready {
        REQUEUE_READY
    } else {
        REQUEUE_NOT_READY
    };
    let requeue = found.balance.requeue.map_or(requeue, |r| r.min(requeue));
    let requeue = found
        .controller
        .as_ref()
        .map_or(requeue, |rt| rt.tls_renewal_in().min(requeue));
    Action::requeue(
        found
            .certificates
            .requeue
            .map_or(requeue, |r| r.min(requeue)),
    )
}
