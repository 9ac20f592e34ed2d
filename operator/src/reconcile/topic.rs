//! Reconciler of `Topic`: checks the topic against its cluster and Kafka's
//! topic configs, hands it to the cluster's controller and reports it in
//! conditions. Placement, leaders and ISRs are the cluster controller's; it
//! writes them into `.status.partitions`. A changed
//! `spec.replicationFactor` is carried out by the controller as a
//! reassignment of every partition; while it runs the Topic is not Ready
//! (reason `ReplicationFactorChanging`, or `ReplicationFactorChangeBlocked`
//! while the controller cannot start it), with Events when it starts, is
//! refused and is done.
//!
//! Deleting a Topic goes through the finalizer [`TOPIC_FINALIZER`]: the
//! cluster's controller deletes the topic, and the brokers its data. That is
//! best effort:
//! when the cluster is gone or being deleted the finalizer is released at once,
//! and when the cluster does not answer it is released after a grace period,
//! so a namespace deletion never hangs on it.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::runtime::finalizer::{finalizer, Event as Finalizer};
use kube::ResourceExt;
use skein_crds::condition::{self, ConditionType};
use skein_crds::Topic;
use tracing::{info, warn};

use super::{cleanup_grace_over, get_cluster, patch_status, publish};
use crate::cluster_controllers::ReplicationFactorStep;
use crate::context::Context;
use crate::error::TopicRemovalError;
use crate::error::{Error, Result};
use crate::manifests::ClusterNames;
use crate::topic_mirror::partition_status;
use crate::{status, validate};

/// Resource kind label for metrics.
pub const KIND: &str = "Topic";
/// Finalizer that removes a deleted topic's data from its cluster.
pub const TOPIC_FINALIZER: &str = "skein.dev/topic-data";

/// Reconciles one Topic, timed and counted.
pub async fn reconcile(topic: Arc<Topic>, ctx: Arc<Context>) -> Result<Action> {
    let _timer = ctx.metrics.reconcile_started(KIND);
    reconcile_at(topic, ctx, Timestamp::now()).await
}

/// [`reconcile`] with the clock passed in (tests fix it).
pub async fn reconcile_at(topic: Arc<Topic>, ctx: Arc<Context>, now: Timestamp) -> Result<Action> {
    let ns = topic.namespace().ok_or(Error::NotNamespaced)?;
    let topics: Api<Topic> = Api::namespaced(ctx.client.clone(), &ns);
    let (ctx, api) = (&ctx, &topics);
    finalizer(&topics, TOPIC_FINALIZER, topic, |event| async move {
        match event {
            Finalizer::Apply(t) => apply(&t, ctx, api, now).await,
            Finalizer::Cleanup(t) => cleanup(&t, ctx, now).await,
        }
    })
    .await
    .map_err(|e| Error::Finalizer(Box::new(e)))
}

async fn apply(
    topic: &Topic,
    ctx: &Context,
    topics: &Api<Topic>,
    now: Timestamp,
) -> Result<Action> {
    let ns = topic.namespace().ok_or(Error::NotNamespaced)?;
    let name = topic.name_any();
    let cluster_name = &topic.spec.cluster_ref.name;
    let now_t = Time(now);
    let first_look =
        topic.status.as_ref().and_then(|s| s.observed_generation) != topic.metadata.generation;

    let Some(cluster) = get_cluster(ctx, &ns, cluster_name).await? else {
        let msg = format!("KafkaCluster {cluster_name:?} not found in namespace {ns:?}");
        patch_status(
            topics,
            &name,
            &status::topic_refused(topic, "ClusterNotFound", &msg, now_t),
        )
        .await?;
        if first_look {
            publish(
                ctx,
                topic,
                EventType::Warning,
                "ClusterNotFound",
                "Validate",
                msg,
            )
            .await;
        }
        // The Topic controller also watches clusters; this is a safety net.
        return Ok(Action::requeue(Duration::from_secs(60)));
    };

    if let Err(invalid) = validate::validate_topic(topic, &cluster) {
        warn!(topic = %name, namespace = %ns, reason = invalid.reason(), "refusing spec: {invalid}");
        let msg = invalid.to_string();
        patch_status(
            topics,
            &name,
            &status::topic_refused(topic, invalid.reason(), &msg, now_t),
        )
        .await?;
        if first_look {
            publish(
                ctx,
                topic,
                EventType::Warning,
                invalid.reason(),
                "Validate",
                msg,
            )
            .await;
        }
        return Ok(Action::await_change());
    }

    // The cluster's controller creates the topic, changes its replication
    // factor, adds partitions and applies configs; its placement comes back
    // into status.partitions. Readiness is judged on the controller's own
    // view where it runs (fresher than the mirrored status).
    let mut step = None;
    let mut live = None;
    if let Some(rt) = ctx
        .controllers
        .as_ref()
        .and_then(|r| r.get(&ns, cluster_name))
    {
        match rt.ensure_topic(&topic.spec, topic.kafka_name()) {
            Ok(s) => step = Some(s),
            Err(source) => {
                warn!(topic = %name, namespace = %ns, error = %source, "the controller refused the topic");
                return Err(Error::Controller {
                    topic: topic.kafka_name().to_string(),
                    source,
                });
            }
        }
        live = rt
            .controller
            .view()
            .topics
            .get(topic.kafka_name())
            .map(|meta| partition_status(meta));
    }
    let placed = live.unwrap_or_else(|| {
        topic
            .status
            .as_ref()
            .map(|s| s.partitions.clone())
            .unwrap_or_default()
    });
    let blocked = match &step {
        Some(ReplicationFactorStep::Blocked(why)) => Some(why.as_str()),
        _ => None,
    };
    let patch = status::topic_accepted(topic, &placed, blocked, now_t);
    let ready = skein_crds::condition::is_true(&patch.conditions, skein_crds::ConditionType::Ready);
    patch_status(topics, &name, &patch).await?;
    if first_look {
        let note = format!(
            "accepted: {} partition(s), replication factor {} on cluster {cluster_name}",
            topic.spec.partitions, topic.spec.replication_factor
        );
        publish(ctx, topic, EventType::Normal, "Accepted", "Validate", note).await;
    }
    replication_factor_events(ctx, topic, step.as_ref(), &patch.conditions).await;
    Ok(Action::requeue(Duration::from_secs(if ready {
        300
    } else {
        30
    })))
}

/// Events of a replication factor change: when reassignments start, when
/// the controller first refuses to start them, and when the change is done
/// (Ready again after `ReplicationFactorChanging`).
async fn replication_factor_events(
    ctx: &Context,
    topic: &Topic,
    step: Option<&ReplicationFactorStep>,
    now: &[Condition],
) {
    let rf = topic.spec.replication_factor;
    let before = topic.status.as_ref().map_or(&[][..], |s| &s.conditions[..]);
    let reason_before = |t: ConditionType| condition::find(before, t).map(|c| c.reason.as_str());
    match step {
        Some(ReplicationFactorStep::Started(n)) => {
            let note = format!(
                "replication factor {rf}: reassigning {n} partition(s); added replicas count once they have caught up, removed ones go once the others are in sync"
            );
            publish(
                ctx,
                topic,
                EventType::Normal,
                status::REPLICATION_FACTOR_CHANGING,
                "Reassign",
                note,
            )
            .await;
        }
        Some(ReplicationFactorStep::Blocked(why))
            if reason_before(ConditionType::Reconciling)
                != Some(status::REPLICATION_FACTOR_CHANGE_BLOCKED) =>
        {
            let note = format!("replication factor {rf} cannot be reached now (retrying): {why}");
            publish(
                ctx,
                topic,
                EventType::Warning,
                status::REPLICATION_FACTOR_CHANGE_BLOCKED,
                "Reassign",
                note,
            )
            .await;
        }
        _ => {}
    }
    let was_changing = matches!(
        reason_before(ConditionType::Ready),
        Some(status::REPLICATION_FACTOR_CHANGING | status::REPLICATION_FACTOR_CHANGE_BLOCKED)
    );
    if was_changing && condition::is_true(now, ConditionType::Ready) {
        let note = format!("every partition has {rf} replicas, all in sync");
        publish(
            ctx,
            topic,
            EventType::Normal,
            "ReplicationFactorChanged",
            "Reassign",
            note,
        )
        .await;
    }
}

async fn cleanup(topic: &Topic, ctx: &Context, now: Timestamp) -> Result<Action> {
    let ns = topic.namespace().ok_or(Error::NotNamespaced)?;
    let kafka_name = topic.kafka_name().to_string();
    let cluster = match get_cluster(ctx, &ns, &topic.spec.cluster_ref.name).await {
        Ok(c) => c,
        // Cannot even read the cluster: treat like an unreachable cluster below.
        Err(e) => {
            warn!(topic = %kafka_name, error = %e, "reading the cluster during topic cleanup");
            return give_up_or_retry(topic, ctx, now, TopicRemovalError::Cluster(Box::new(e)))
                .await;
        }
    };
    let cluster = match cluster {
        Some(c) if c.metadata.deletion_timestamp.is_none() => c,
        _ => {
            // The data goes with the cluster's volumes; nothing to do here.
            let note = format!(
                "cluster {:?} is gone or going; released topic {kafka_name:?}",
                topic.spec.cluster_ref.name
            );
            info!(topic = %kafka_name, "{note}");
            publish(ctx, topic, EventType::Normal, "ClusterGone", "Delete", note).await;
            return Ok(Action::await_change());
        }
    };
    let names = ClusterNames::of(&cluster);
    let removed = ctx
        .topic_remover
        .delete_topic(&names.namespace, &names.cluster, &kafka_name)
        .await;
    match removed {
        Ok(()) => {
            let note = format!(
                "deleted topic {kafka_name:?} from cluster {}",
                names.cluster
            );
            publish(
                ctx,
                topic,
                EventType::Normal,
                "TopicDeleted",
                "Delete",
                note,
            )
            .await;
            Ok(Action::await_change())
        }
        Err(e) => give_up_or_retry(topic, ctx, now, e).await,
    }
}

/// Retries the removal until the grace period after the deletion request has
/// passed, then releases the finalizer with a Warning event.
async fn give_up_or_retry(
    topic: &Topic,
    ctx: &Context,
    now: Timestamp,
    error: TopicRemovalError,
) -> Result<Action> {
    let kafka_name = topic.kafka_name().to_string();
    if let Some(grace) = cleanup_grace_over(&topic.metadata, ctx, now) {
        let note = format!(
            "gave up removing topic {kafka_name:?} after {grace}s: {error}; its data may remain on the brokers"
        );
        warn!(topic = %kafka_name, "{note}");
        publish(
            ctx,
            topic,
            EventType::Warning,
            "TopicDataNotRemoved",
            "Delete",
            note,
        )
        .await;
        return Ok(Action::await_change());
    }
    Err(Error::TopicRemoval {
        topic: kafka_name,
        source: error,
    })
}

/// Counts the failure and retries with a short delay.
pub fn error_policy(_topic: Arc<Topic>, error: &Error, ctx: Arc<Context>) -> Action {
    warn!(error = %error, "Topic reconcile failed");
    ctx.metrics.reconcile_failed(KIND, error);
    Action::requeue(Duration::from_secs(10))
}
