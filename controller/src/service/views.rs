//! The [`ClusterView`] the service publishes, built from the core: whole,
//! or from the previous view and the topics an event changed.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use uuid::Uuid;

use crate::view::{BrokerView, ClusterView, PartitionView, TopicView};
use crate::ControllerCore;

fn topic_view(name: &str, t: &crate::TopicImage) -> Arc<TopicView> {
    Arc::new(TopicView {
        name: name.to_string(),
        id: Uuid::from_u128(t.spec.topic_id.0),
        partitions: t
            .partitions
            .iter()
            .map(|p| PartitionView {
                replicas: p.replicas.clone(),
                isr: p.isr.clone(),
                leader: p.leader,
                leader_epoch: p.leader_epoch,
                adding_replicas: p.adding_replicas.clone(),
                removing_replicas: p.removing_replicas.clone(),
                elr: p.elr.clone(),
                last_known_elr: p.last_known_elr.clone(),
            })
            .collect(),
        configs: t.spec.configs.clone(),
    })
}

/// The view brokers and platforms read, from the previous one and what an
/// event changed (topics by name, and whether anything else did): only
/// those parts are built again, so an ISR change in a cluster of 100 000
/// partitions copies one topic, not all of them.
pub(super) fn updated_view(
    core: &ControllerCore,
    cluster_id: &str,
    previous: &ClusterView,
    changed_topics: &BTreeSet<String>,
    changed_rest: bool,
) -> ClusterView {
    let mut view = if changed_rest {
        ClusterView {
            topics: previous.topics.clone(),
            topic_names_by_id: previous.topic_names_by_id.clone(),
            ..full_view_without_topics(core, cluster_id)
        }
    } else {
        previous.clone()
    };
    for name in changed_topics {
        match core.topics().get(name) {
            Some(t) => {
                view.topics.insert(name.clone(), topic_view(name, t));
            }
            None => {
                view.topics.remove(name);
            }
        }
    }
    if changed_topics.is_empty() {
        view
    } else {
        view.index_ids()
    }
}

pub(super) fn full_view(core: &ControllerCore, cluster_id: &str) -> ClusterView {
    let mut view = full_view_without_topics(core, cluster_id);
    view.topics = core
        .topics()
        .iter()
        .map(|(name, t)| (name.clone(), topic_view(name, t)))
        .collect();
    view.index_ids()
}

fn full_view_without_topics(core: &ControllerCore, cluster_id: &str) -> ClusterView {
    let brokers: BTreeMap<i32, BrokerView> = core
        .brokers()
        .values()
        .map(|b| {
            (
                b.id,
                BrokerView {
                    id: b.id,
                    host: b.host.clone(),
                    port: b.port,
                    rack: b.rack.clone(),
                    alive: b.is_alive(),
                    storage_lost: b.storage_lost,
                    storage_losses: b.storage_losses,
                    endpoints: b.endpoints.clone(),
                    broker_epoch: b.broker_epoch,
                    in_controlled_shutdown: b.in_controlled_shutdown,
                    software_version: b.software.version.clone(),
                },
            )
        })
        .collect();
    // Every broker forwards admin requests to the controller, so any live
    // one can be named controller; clients only need a stable answer.
    let controller_id = brokers
        .values()
        .find(|b| b.alive)
        .map(|b| b.id)
        .unwrap_or(-1);
    ClusterView {
        cluster_id: cluster_id.to_string(),
        version: 0,
        topics: Default::default(),
        topic_names_by_id: Default::default(),
        brokers,
        controller_id,
        scram_credentials: Arc::new(core.scram_credentials().clone()),
        client_quotas: Arc::new(core.client_quotas().clone()),
        acls: Arc::new(core.acls().clone()),
        broker_configs: Arc::new(core.broker_configs().clone()),
        delegation_tokens: Arc::new(core.delegation_tokens().clone()),
        resource_configs: Arc::new(core.resource_configs().clone()),
        features: {
            let supported = crate::features::supported();
            let cluster = &core.image().cluster;
            crate::view::ViewFeatures {
                finalized: supported
                    .iter()
                    .map(|f| (f.name.clone(), cluster.feature_level(&f.name)))
                    .collect(),
                controller: supported,
            }
        },
    }
}
