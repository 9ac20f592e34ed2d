//! The controller's view mirrored into the cluster's Topic resources: every
//! published change is written into `.status` of each Topic (topic id,
//! leader, replicas, ISR, leader epoch and running reassignment per
//! partition, under-replicated count, and the bytes on disk and in remote
//! storage from [`crate::topic_storage`]) under the field manager
//! [`STATUS_MANAGER`], so it never fights the Topic reconciler over the
//! conditions; a topic created through the Kafka API (`CreateTopics`,
//! auto-creation) gets a Topic resource. Also sets the per-cluster gauges.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, Resource, ResourceExt};
use serde_json::json;
use skein_controller::ControllerService;
use skein_crds::{PartitionStatus, Topic, TopicSpec};
use tracing::{info, warn};

use crate::manifests::ClusterNames;

/// Field manager of the partition part of Topic status (the Topic
/// reconciler owns the conditions under its own manager).
pub const STATUS_MANAGER: &str = "skein-operator-controller";
/// Label on Topic resources made for topics created through the Kafka API.
pub const CREATED_BY_KAFKA: &str = "skein.dev/created-by";

/// The partition list of a topic as Topic status shows it.
pub fn partition_status(meta: &skein_controller::TopicView) -> Vec<PartitionStatus> {
    meta.partitions
        .iter()
        .enumerate()
        .map(|(i, p)| PartitionStatus {
            partition: i as i32,
            leader: p.leader,
            replicas: p.replicas.clone(),
            isr: p.isr.clone(),
            leader_epoch: p.leader_epoch,
            adding_replicas: p.adding_replicas.clone(),
            removing_replicas: p.removing_replicas.clone(),
        })
        .collect()
}

/// The Topic resource name for a Kafka topic name: lower case, `_` and `.`
/// become `-` (the Kafka name is kept in `spec.topicName`).
pub fn resource_name(kafka_name: &str) -> String {
    let s: String = kafka_name
        .chars()
        .map(|c| match c {
            'a'..='z' | '0'..='9' | '-' => c,
            'A'..='Z' => c.to_ascii_lowercase(),
            _ => '-',
        })
        .collect();
    let s = s.trim_matches('-');
    let s = if s.is_empty() { "topic" } else { s };
    s.chars().take(253).collect()
}

/// Sets the per-cluster gauges from a view.
fn observe(
    metrics: &crate::metrics::Metrics,
    names: &ClusterNames,
    view: &skein_controller::ClusterView,
) {
    let labels = [names.namespace.as_str(), names.cluster.as_str()];
    let health = view.partition_health();
    metrics
        .offline
        .with_label_values(&labels)
        .set(health.offline as i64);
    metrics
        .under_replicated
        .with_label_values(&labels)
        .set(health.under_replicated as i64);
    metrics
        .below_replication_factor
        .with_label_values(&labels)
        .set(health.below_replication_factor as i64);
    metrics
        .reassigning
        .with_label_values(&labels)
        .set(health.reassigning as i64);
    metrics
        .brokers_alive
        .with_label_values(&labels)
        .set(view.brokers.values().filter(|b| b.alive).count() as i64);
}

/// Writes the controller's view into the cluster's Topic resources whenever
/// it changes (and every 10 s, for Topics created since), and creates Topic
/// resources for topics made through the Kafka API.
pub(crate) async fn mirror_topics(
    client: Client,
    names: ClusterNames,
    controller: Arc<ControllerService>,
    metrics: crate::metrics::Metrics,
) {
    let topics: Api<Topic> = Api::namespaced(client.clone(), &names.namespace);
    let mut changes = controller.subscribe();
    let mut written: HashMap<String, serde_json::Value> = HashMap::new();
    let mut elections_seen: HashMap<&'static str, u64> = HashMap::new();
    let mut storage = crate::topic_storage::TopicStorage::default();
    loop {
        tokio::select! {
            r = changes.changed() => if r.is_err() { return },
            _ = tokio::time::sleep(Duration::from_secs(10)) => {}
        }
        // Let a burst of changes (an election touches many partitions) settle.
        tokio::time::sleep(Duration::from_millis(100)).await;
        let view = controller.view();
        observe(&metrics, &names, &view);
        storage.refresh(&client, &names, &view).await;
        let labels = [names.namespace.as_str(), names.cluster.as_str()];
        for kind in skein_controller::service::ELECTION_KINDS {
            let now = controller.elections.with_label_values(&[kind]).get();
            let seen = elections_seen.entry(kind).or_insert(0);
            if now > *seen {
                metrics
                    .elections
                    .with_label_values(&[labels[0], labels[1], kind])
                    .inc_by(now - *seen);
                *seen = now;
            }
        }
        let list = match topics.list(&ListParams::default()).await {
            Ok(l) => l.items,
            Err(e) => {
                warn!(error = %e, "listing Topics to mirror partition state");
                continue;
            }
        };
        let ours: Vec<&Topic> = list
            .iter()
            .filter(|t| t.spec.cluster_ref.name == names.cluster)
            .collect();
        for t in &ours {
            if t.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let Some(meta) = view.topics.get(t.kafka_name()) else {
                continue;
            };
            let partitions = partition_status(meta);
            let under = partitions
                .iter()
                .filter(|p| p.isr.len() < p.replicas.len())
                .count() as i32;
            let mut status = json!({
                "topicId": skein_controller::kafka_base64(meta.id.into_bytes()),
                "partitions": partitions,
                "underReplicatedPartitions": under,
            });
            if let Some(s) = storage.get(t.kafka_name()) {
                status["storage"] = json!(s);
            }
            let name = t.name_any();
            if written.get(&name) == Some(&status) {
                continue;
            }
            let patch = json!({
                "apiVersion": Topic::api_version(&()),
                "kind": Topic::kind(&()),
                "status": status,
            });
            match topics
                .patch_status(
                    &name,
                    &PatchParams::apply(STATUS_MANAGER).force(),
                    &Patch::Apply(&patch),
                )
                .await
            {
                Ok(_) => {
                    written.insert(name, status);
                }
                Err(e) => warn!(topic = %name, error = %e, "writing partition status"),
            }
        }
        // Topics made through the Kafka API get a resource.
        for (kafka_name, meta) in view.topics.iter() {
            if kafka_name.starts_with("__") || ours.iter().any(|t| t.kafka_name() == kafka_name) {
                continue;
            }
            let name = resource_name(kafka_name);
            if list.iter().any(|t| t.name_any() == name) {
                continue; // taken by another cluster's Topic; leave it
            }
            // The replicas a running reassignment heads for: what the topic has.
            let rf = meta
                .partitions
                .first()
                .map_or(1, |p| p.replicas.len() - p.removing_replicas.len())
                as i32;
            let topic = Topic::new(
                &name,
                TopicSpec {
                    cluster_ref: skein_crds::ClusterRef {
                        name: names.cluster.clone(),
                    },
                    topic_name: (name != *kafka_name).then(|| kafka_name.clone()),
                    partitions: meta.partitions.len() as i32,
                    replication_factor: rf,
                    // Throttle lists belong to a running move, not the topic.
                    config: meta
                        .configs
                        .iter()
                        .filter(|(k, _)| {
                            *k != skein_controller::replication_throttle::LEADER_REPLICAS
                                && *k != skein_controller::replication_throttle::FOLLOWER_REPLICAS
                        })
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect(),
                },
            );
            let mut topic = topic;
            topic.metadata.labels = Some(BTreeMap::from([(
                CREATED_BY_KAFKA.to_string(),
                "kafka-api".to_string(),
            )]));
            match topics.create(&PostParams::default(), &topic).await {
                Ok(_) => {
                    info!(topic = %kafka_name, resource = %name, "Topic resource created for a Kafka-API topic")
                }
                Err(kube::Error::Api(e)) if e.code == 409 => {}
                Err(e) => warn!(topic = %kafka_name, error = %e, "creating a Topic resource"),
            }
        }
    }
}
