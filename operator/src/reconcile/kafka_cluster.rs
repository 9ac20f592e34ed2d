//! Reconciler of `KafkaCluster`: validate → build → apply ConfigMap, Services,
//! ServiceAccount, PDB, StatefulSet (in that order, so the StatefulSet's pods
//! find their config and DNS) → status → events.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams};
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::ResourceExt;
use skein_crds::{KafkaCluster, ListenerType, Topic};
use tracing::{info, warn};

use super::{apply, brokers, patch_status, publish, storage};
use crate::context::Context;
use crate::error::{ControllerStartError, Error, Result};
use crate::manifests::{cluster_objects, ClusterNames};
use crate::{status, validate};
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::networking::v1::Ingress;

/// Resource kind label for metrics.
pub const KIND: &str = "KafkaCluster";

/// Requeue while brokers are still coming up.
const REQUEUE_NOT_READY: Duration = Duration::from_secs(10);
/// Re-check while a drain, a replica move or a rolling restart runs.
const REQUEUE_PROGRESS: Duration = Duration::from_secs(3);
/// Periodic re-check once everything is ready.
const REQUEUE_READY: Duration = Duration::from_secs(300);
/// Re-check of a refusal whose cause is not watched (a Secret in the way).
const REQUEUE_REFUSED: Duration = Duration::from_secs(30);

/// Reconciles one KafkaCluster, timed and counted.
pub async fn reconcile(kc: Arc<KafkaCluster>, ctx: Arc<Context>) -> Result<Action> {
    let _timer = ctx.metrics.reconcile_started(KIND);
    reconcile_at(&kc, &ctx, Time(Timestamp::now())).await
}

/// [`reconcile`] with the clock passed in (tests fix it).
pub async fn reconcile_at(kc: &KafkaCluster, ctx: &Context, now: Time) -> Result<Action> {
    let ns = kc.namespace().ok_or(Error::NotNamespaced)?;
    let name = kc.name_any();
    let clusters: Api<KafkaCluster> = Api::namespaced(ctx.client.clone(), &ns);

    // Dereference: the topics of this cluster decide whether a scale-down fits.
    let topics: Api<Topic> = Api::namespaced(ctx.client.clone(), &ns);
    let topics: Vec<Topic> = topics
        .list(&ListParams::default())
        .await
        .map_err(|source| Error::Dereference {
            what: "topics",
            source,
        })?
        .items
        .into_iter()
        .filter(|t| t.spec.cluster_ref.name == name)
        .collect();

    // Validate: a refused spec is a condition on the object, not an error
    // (retrying cannot fix it; the next spec change triggers a reconcile).
    if let Err(invalid) = validate::validate_cluster(kc, &topics) {
        refuse(ctx, kc, &clusters, &invalid, now).await?;
        return Ok(Action::await_change());
    }

    // A Kubernetes user who still turns the control plane's TLS off is told
    // it stays on (the field is kept so such manifests still apply).
    if kc.spec.listeners.control_plane_tls == Some(false)
        && observed_generation(kc) != kc.metadata.generation
    {
        publish(
            ctx,
            kc,
            EventType::Warning,
            "ControlPlaneTlsIgnored",
            "Validate",
            "spec.listeners.controlPlaneTls is deprecated and ignored: the control plane is always on mutual TLS".into(),
        )
        .await;
    }

    // The cluster's controller (kubernetes platform): started on first
    // sight, then kept in session with every broker of the spec. It decides
    // how far the StatefulSet may shrink (leaving brokers are drained first).
    // Its control-plane certificates are made or renewed on the way.
    // A sealing key it cannot use (docs/metadata-store.md) refuses the
    // cluster with a condition naming the Secret, looked at again every 30 s.
    let controller = match &ctx.controllers {
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
                if !reported && observed_generation(kc) == kc.metadata.generation {
                    publish(
                        ctx,
                        kc,
                        EventType::Warning,
                        refused.reason(),
                        "StartController",
                        refused.to_string(),
                    )
                    .await;
                }
                refuse(ctx, kc, &clusters, &refused, now).await?;
                return Ok(Action::requeue(REQUEUE_REFUSED));
            }
            Err(e) => return Err(e.into()),
        },
        None => None,
    };
    let mut progress = None;
    let names = ClusterNames::of(kc);
    // Client listeners: the Services (and Ingresses) of external listeners,
    // whose node ports and load balancer addresses the brokers advertise (so
    // they come before the ConfigMap); the addresses of the nodes the brokers
    // run on (nodeport clients bootstrap from them); the certificates, which
    // hold every one of those names.
    let listener_services = apply_listener_services(ctx, kc, &ns, &names).await?;
    let node_addresses = broker_node_addresses(ctx, kc, &ns, &names).await?;
    let mut cert_names = node_addresses.clone();
    cert_names.extend(crate::manifests::listeners::external_names(
        kc,
        &listener_services,
    ));
    let certificates =
        match crate::listener_tls::ensure(&ctx.client, kc, &cert_names, ctx.options.ca_phase)
            .await?
        {
            Ok(c) => c,
            // A Secret of the cluster's name that is someone else's, or one
            // CA brought for both: nothing more is written until it changes.
            // Neither is watched, so look again.
            Err(refused) => {
                refuse(ctx, kc, &clusters, &refused, now).await?;
                return Ok(Action::requeue(REQUEUE_REFUSED));
            }
        };
    let mut objects = cluster_objects(kc, &ctx.options, &listener_services);
    let sts_api: Api<StatefulSet> = Api::namespaced(ctx.client.clone(), &ns);
    let current_sts = sts_api
        .get_opt(&objects.statefulset.name_any())
        .await
        .map_err(|source| Error::Dereference {
            what: "StatefulSet",
            source,
        })?;
    // Claim templates never change (the API server refuses it): a grown
    // spec.storage.size reaches the volumes through their claims instead.
    let template = current_sts.as_ref().and_then(storage::template_size);
    if let Some(size) = &template {
        storage::keep_template_size(&mut objects.statefulset, size);
    }
    if let Some(rt) = &controller {
        let current = current_sts
            .as_ref()
            .and_then(|s| s.spec.as_ref().and_then(|s| s.replicas));
        // Self-healing as the spec says; brokers a scale-down is draining
        // take no new replica.
        let leaving: std::collections::BTreeSet<i32> =
            (kc.spec.replicas..current.unwrap_or(0)).collect();
        let healing = &kc.spec.self_healing;
        rt.controller.set_self_healing(healing.enabled.then(|| {
            skein_controller::SelfHealingConfig {
                broker_loss_grace_ms: healing.broker_loss_grace_seconds.max(0) as u64 * 1000,
                excluded: leaving,
            }
        }));
        super::replication_throttle::ensure(rt, kc);
        let step = brokers::scale_step(rt, kc, current);
        rt.set_brokers(step.replicas);
        if let Some(spec) = objects.statefulset.spec.as_mut() {
            spec.replicas = Some(step.replicas);
        }
        progress = step.progress;
    }

    // Build and apply.
    let client = &ctx.client;
    apply(client, &ns, &objects.config_map).await?;
    apply(client, &ns, &objects.headless_service).await?;
    apply(client, &ns, &objects.bootstrap_service).await?;
    apply(client, &ns, &objects.service_account).await?;
    apply(client, &ns, &objects.pdb).await?;
    if let Some(np) = &objects.network_policy {
        apply(client, &ns, np).await?;
    }
    let sts = apply(client, &ns, &objects.statefulset).await?;
    let volumes =
        storage::volume_step(ctx, kc, &ns, &names, template.as_ref(), kc.spec.replicas).await?;

    if let Some(rt) = &controller {
        if progress.is_none() {
            // Volumes whose filesystem grows only offline restart their
            // broker once, under the same rules as a roll.
            let filesystem = match &volumes {
                Some(storage::VolumeReport::Resizing { restart, .. }) => restart.clone(),
                _ => Vec::new(),
            };
            progress = brokers::rolling_restart_step(client, rt, kc, &sts, &filesystem).await?;
            if let Some(p) = progress
                .as_ref()
                .filter(|p| p.message.starts_with("restarting"))
            {
                publish(
                    ctx,
                    kc,
                    EventType::Normal,
                    "RestartingBroker",
                    "RollingRestart",
                    p.message.clone(),
                )
                .await;
            }
        }
    }
    // spec.featureLevel, once nothing else is in progress.
    let mut features = controller
        .as_ref()
        .map(|rt| super::features::feature_step(rt, kc, progress.is_some()));
    if let Some(f) = &mut features {
        if let Some(from) = f.raised_from {
            publish(
                ctx,
                kc,
                EventType::Normal,
                "FeatureLevelFinalized",
                "FinalizeFeatureLevel",
                format!(
                    "{} finalized at {} (was {from}); releases that cannot run at it are refused from now on",
                    skein_controller::features::SKEIN_VERSION,
                    f.finalized
                ),
            )
            .await;
        }
        if progress.is_none() {
            progress = f.progress.take();
        }
    }
    // The balancer, when nothing else is in progress; a plan it shows is
    // kept in the status meanwhile.
    let mut balance = super::balance::BalanceStep {
        status: kc.status.as_ref().and_then(|s| s.balance.clone()),
        ..Default::default()
    };
    if let (Some(rt), None) = (&controller, &progress) {
        balance = super::balance::balance_step(rt, kc, now.0).await;
        progress = balance.progress.take();
    }
    let view = controller.as_ref().map(|rt| rt.controller.view());

    // Rolling restart progress: pods not yet on the newest revision.
    let pending = sts.status.as_ref().map_or(0, |s| {
        if s.update_revision.is_some() && s.update_revision != s.current_revision {
            (s.replicas as i64 - s.updated_replicas.unwrap_or(0) as i64).max(0)
        } else {
            0
        }
    });
    ctx.metrics
        .rolling_pending
        .with_label_values(&[ns.as_str(), name.as_str()])
        .set(pending);

    // Status from what the API server returned for the StatefulSet.
    let mut new_status = status::cluster_applied(kc, sts.status.as_ref(), now.clone());
    if let Some(view) = &view {
        status::add_controller_view(&mut new_status, kc, view, now.clone());
    }
    if let (Some(rt), Some(view)) = (&controller, &view) {
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        status::set_self_healing(
            &mut new_status,
            kc,
            view,
            &rt.controller.lost_since(),
            now_ms,
            now.clone(),
        );
    }
    new_status.listeners =
        crate::manifests::listeners::statuses(kc, &names, &listener_services, &node_addresses);
    // A CA's phase in the status also wakes the KafkaUsers of the cluster
    // (they watch it): a new clients CA gives them new certificates.
    new_status.certificate_authorities = certificates.statuses.clone();
    if let Some(p) = &progress {
        status::set_progress(&mut new_status, kc, p.reason, &p.message, now.clone());
    }
    if let Some(report) = &volumes {
        status::set_volumes(&mut new_status, kc, report, now.clone());
    }
    if let Some(f) = &features {
        status::set_feature_level(
            &mut new_status,
            kc,
            f.finalized,
            f.blocked.as_deref(),
            now.clone(),
        );
    }
    new_status.balance = balance.status.clone();
    if let Some((balanced, reason, message)) = &balance.condition {
        status::set_balanced(&mut new_status, kc, *balanced, reason, message, now.clone());
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
    let all_ready = new_status.ready_replicas >= kc.spec.replicas && progress.is_none();
    patch_status(&clusters, &name, &new_status).await?;

    // Events for brokers that came back on an empty disk (counted by the
    // controller, so a loss is reported even when the copy back finished
    // before this reconcile), and when they have copied everything back.
    let brokers_of = |brokers: Option<&Vec<skein_crds::BrokerStatus>>| {
        brokers
            .into_iter()
            .flatten()
            .map(|b| (b.id, b.clone()))
            .collect::<std::collections::BTreeMap<i32, skein_crds::BrokerStatus>>()
    };
    let before = brokers_of(kc.status.as_ref().map(|s| &s.brokers));
    let after = brokers_of(new_status.brokers.as_ref());
    let losses =
        |b: Option<&skein_crds::BrokerStatus>| b.and_then(|b| b.storage_losses).unwrap_or(0);
    let recovering =
        |b: Option<&skein_crds::BrokerStatus>| b.is_some_and(|b| b.replicas_to_recover.is_some());
    for (id, b) in &after {
        let was = before.get(id);
        if losses(Some(b)) > losses(was) {
            let progress = match b.replicas_to_recover {
                Some(0) | None => "every replica is in sync again".to_string(),
                Some(n) => format!("{n} replicas are still being copied back from their leaders"),
            };
            publish(
                ctx,
                kc,
                EventType::Warning,
                "BrokerStorageLost",
                "Recover",
                format!("broker {id} came back with an empty log directory (lost disk or new volume): its replicas left their ISRs, lead nothing, and are copied back; {progress}"),
            )
            .await;
        }
        if (recovering(was) || losses(Some(b)) > losses(was)) && !recovering(Some(b)) {
            publish(
                ctx,
                kc,
                EventType::Normal,
                "BrokerStorageRecovered",
                "Recover",
                format!("broker {id} has copied every replica back and is in sync again"),
            )
            .await;
        }
    }

    if let Some((reason, note)) = balance.event.take() {
        publish(ctx, kc, EventType::Normal, reason, "Balance", note).await;
    }

    // Events: one per new generation, saying what was done.
    if observed_generation(kc) != kc.metadata.generation {
        let previous = kc.status.as_ref().map(|s| s.replicas);
        let note = match previous {
            Some(p) if p != 0 && p != kc.spec.replicas => format!(
                "applied ConfigMap, Services, ServiceAccount, PodDisruptionBudget and StatefulSet; scaled from {p} to {} brokers",
                kc.spec.replicas
            ),
            _ => format!(
                "applied ConfigMap, Services, ServiceAccount, PodDisruptionBudget and StatefulSet with {} brokers",
                kc.spec.replicas
            ),
        };
        info!(cluster = %name, namespace = %ns, "{note}");
        publish(ctx, kc, EventType::Normal, "Applied", "Reconcile", note).await;
    }
    tracing::debug!(statefulset = %names.statefulset(), all_ready, "reconciled");
    let resizing = matches!(volumes, Some(storage::VolumeReport::Resizing { .. }));
    let requeue = if progress.is_some() || resizing {
        REQUEUE_PROGRESS
    } else if all_ready {
        REQUEUE_READY
    } else {
        REQUEUE_NOT_READY
    };
    // A CA replacement moves on when its phase ends; the control plane's
    // certificates are renewed when due.
    let requeue = balance.requeue.map_or(requeue, |r| r.min(requeue));
    let requeue = controller
        .as_ref()
        .map_or(requeue, |rt| rt.tls_renewal_in().min(requeue));
    Ok(Action::requeue(
        certificates.requeue.map_or(requeue, |r| r.min(requeue)),
    ))
}

/// Reports a spec that cannot be applied: the condition, and a Warning
/// event the first time a generation is refused.
async fn refuse(
    ctx: &Context,
    kc: &KafkaCluster,
    clusters: &Api<KafkaCluster>,
    invalid: &validate::InvalidSpec,
    now: Time,
) -> Result<()> {
    let name = kc.name_any();
    warn!(cluster = %name, namespace = ?kc.namespace(), reason = invalid.reason(), "refusing spec: {invalid}");
    patch_status(clusters, &name, &status::cluster_invalid(kc, invalid, now)).await?;
    if observed_generation(kc) != kc.metadata.generation {
        publish(
            ctx,
            kc,
            EventType::Warning,
            invalid.reason(),
            "Validate",
            invalid.to_string(),
        )
        .await;
    }
    Ok(())
}

/// The addresses of the nodes the cluster's broker pods run on
/// (`status.hostIP`), sorted, without repeats.
async fn broker_node_addresses(
    ctx: &Context,
    kc: &KafkaCluster,
    ns: &str,
    names: &ClusterNames,
) -> Result<Vec<String>> {
    if kc.spec.listeners.clients.is_empty() {
        return Ok(Vec::new());
    }
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), ns);
    let selector = crate::manifests::selector_string(names);
    let list = pods
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(|source| Error::Dereference {
            what: "broker pods",
            source,
        })?;
    let mut out: Vec<String> = list
        .items
        .iter()
        .filter_map(|p| p.status.as_ref()?.host_ip.clone())
        .collect();
    out.sort();
    out.dedup();
    Ok(out)
}

/// Applies the external listeners' Services (as the API server returns
/// them: node ports assigned, load balancer addresses once the cloud gave
/// them) and Ingresses, and deletes those no longer wanted (a removed
/// listener, brokers scaled away).
async fn apply_listener_services(
    ctx: &Context,
    kc: &KafkaCluster,
    ns: &str,
    names: &ClusterNames,
) -> Result<Vec<Service>> {
    let wanted = crate::manifests::listeners::services(kc, names);
    let mut applied = Vec::with_capacity(wanted.len());
    for svc in &wanted {
        applied.push(apply(&ctx.client, ns, svc).await?);
    }
    let ingresses = crate::manifests::listeners::ingresses(kc, names);
    for ing in &ingresses {
        apply(&ctx.client, ns, ing).await?;
    }
    // Objects to remove exist only if an external listener did (the status
    // lists what the last reconcile applied).
    let had = |t: ListenerType| {
        kc.status
            .iter()
            .flat_map(|s| &s.listeners)
            .any(|l| l.type_ == t.as_str())
    };
    let had_ingress = had(ListenerType::Ingress);
    let had_external =
        had_ingress || had(ListenerType::Nodeport) || had(ListenerType::Loadbalancer);
    if had_external {
        prune_listener_objects::<Service>(ctx, ns, names, &wanted).await?;
    }
    if had_ingress {
        prune_listener_objects::<Ingress>(ctx, ns, names, &ingresses).await?;
    }
    Ok(applied)
}

/// Deletes the listener objects of kind `K` of this cluster not in `wanted`.
async fn prune_listener_objects<K>(
    ctx: &Context,
    ns: &str,
    names: &ClusterNames,
    wanted: &[K],
) -> Result<()>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let api: Api<K> = Api::namespaced(ctx.client.clone(), ns);
    let selector = format!(
        "{},{}",
        crate::manifests::selector_string(names),
        crate::manifests::listeners::LISTENER_LABEL
    );
    let existing = api
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(|source| Error::Dereference {
            what: "listener Services and Ingresses",
            source,
        })?;
    for obj in existing.items {
        let name = obj.name_any();
        if !wanted
            .iter()
            .any(|w| w.meta().name.as_deref() == Some(&name))
        {
            info!(cluster = %names.cluster, namespace = %ns, kind = %K::kind(&()), name = %name,
                "deleting a listener object no longer wanted");
            if let Err(e) = api.delete(&name, &Default::default()).await {
                warn!(kind = %K::kind(&()), name = %name, error = %e, "could not delete a listener object");
            }
        }
    }
    Ok(())
}

fn observed_generation(kc: &KafkaCluster) -> Option<i64> {
    kc.status.as_ref().and_then(|s| s.observed_generation)
}

/// Counts the failure and retries with a short delay.
pub fn error_policy(_kc: Arc<KafkaCluster>, error: &Error, ctx: Arc<Context>) -> Action {
    warn!(error = %error, "KafkaCluster reconcile failed");
    ctx.metrics.reconcile_failed(KIND, error);
    Action::requeue(Duration::from_secs(15))
}
