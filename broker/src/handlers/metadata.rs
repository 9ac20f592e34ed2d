//! Metadata: brokers, topics, partitions and leaders; auto-creates requested
//! topics when the client and `auto.create.topics.enable` allow it.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse, TopicName};
use uuid::Uuid;

use skein_controller::acls::{AclOperation, ResourceType, CLUSTER_NAME};

use super::strb;
use crate::authorizer::{may_create, Authz};
use crate::broker::Broker;
use crate::metadata::{validate_topic_name, ClusterView, TopicView};

pub fn handle(broker: &Arc<Broker>, req: MetadataRequest, version: i16) -> MetadataResponse {
    let cfg = &broker.config;
    let mut resp = MetadataResponse::default();
    let image = broker.metadata.image();
    // Every broker as clients of this listener reach it.
    let listener = super::listener_name();
    for m in image.live_brokers() {
        let Some((host, port)) = m.endpoint(listener.as_deref()) else {
            continue;
        };
        let mut b = MetadataResponseBroker::default();
        b.node_id = BrokerId(m.id);
        b.host = strb(host.to_string());
        b.port = port as i32;
        b.rack = m.rack.clone().map(strb);
        resp.brokers.push(b);
    }
    if resp.brokers.is_empty() {
        // Not registered yet: name ourselves so clients can retry here.
        let own = listener
            .as_deref()
            .and_then(|name| cfg.listeners.iter().find(|l| l.name == name));
        let mut b = MetadataResponseBroker::default();
        b.node_id = BrokerId(cfg.node_id);
        b.host = strb(own.map_or(cfg.advertised_host.clone(), |l| l.advertised_host.clone()));
        b.port = own.map_or(cfg.advertised_port, |l| l.advertised_port);
        b.rack = cfg.rack.clone().map(strb);
        resp.brokers.push(b);
    }
    resp.cluster_id = Some(strb(image.cluster_id.clone()));
    resp.controller_id = BrokerId(if image.controller_id >= 0 {
        image.controller_id
    } else {
        cfg.node_id
    });
    let authz = Authz::current(broker);
    resp.cluster_authorized_operations =
        if (8..=10).contains(&version) && req.include_cluster_authorized_operations {
            if authz.cluster(AclOperation::Describe) {
                authz.authorized_operations(ResourceType::Cluster, CLUSTER_NAME)
            } else {
                0
            }
        } else {
            i32::MIN
        };
    let with_ops = version >= 8 && req.include_topic_authorized_operations;
    let entry = |t: &TopicView| {
        let mut e = topic_entry(t, &image);
        if with_ops {
            e.topic_authorized_operations =
                authz.authorized_operations(ResourceType::Topic, &t.name);
        }
        e
    };
    let describable = |name: &str| authz.topic(AclOperation::Describe, name);
    let denied = || ResponseError::TopicAuthorizationFailed;

    // v0: an empty list means "all topics"; v1+: null means all.
    let requested = match req.topics {
        None => None,
        Some(t) if t.is_empty() && version == 0 => None,
        Some(t) => Some(t),
    };
    let allow_auto = version < 4 || req.allow_auto_topic_creation;
    match requested {
        // All topics: those one may not describe are left out.
        None => {
            for t in broker.metadata.image().topics.values() {
                if describable(&t.name) {
                    resp.topics.push(entry(t));
                }
            }
        }
        Some(list) => {
            for rt in list {
                let entry = match rt.name {
                    // Authorization before existence.
                    Some(name) if !describable(&name.0) => {
                        error_entry(Some(name.0.to_string()), Uuid::nil(), denied())
                    }
                    Some(name) => {
                        let name = name.0.to_string();
                        match broker.metadata.topic(&name) {
                            Some(t) => entry(&t),
                            None if allow_auto && !may_create(&authz, &name) => {
                                error_entry(Some(name), Uuid::nil(), denied())
                            }
                            None if allow_auto => match validate_topic_name(&name)
                                .and_then(|_| broker.auto_create(&name))
                            {
                                Ok(t) => entry(&t),
                                Err(e) => error_entry(Some(name), Uuid::nil(), e.code),
                            },
                            None => error_entry(
                                Some(name),
                                Uuid::nil(),
                                ResponseError::UnknownTopicOrPartition,
                            ),
                        }
                    }
                    None => match broker.metadata.topic_by_id(rt.topic_id) {
                        Some(t) if !describable(&t.name) => {
                            error_entry(None, rt.topic_id, denied())
                        }
                        Some(t) => entry(&t),
                        None => error_entry(None, rt.topic_id, ResponseError::UnknownTopicId),
                    },
                };
                resp.topics.push(entry);
            }
        }
    }
    resp
}

fn error_entry(name: Option<String>, id: Uuid, code: ResponseError) -> MetadataResponseTopic {
    let mut t = MetadataResponseTopic::default();
    t.error_code = code.code();
    t.name = name.map(|n| TopicName(strb(n)));
    t.topic_id = id;
    t.topic_authorized_operations = i32::MIN;
    t
}

/// The replicas on brokers that are not alive (fenced or gone).
pub(super) fn offline_replicas(image: &ClusterView, replicas: &[i32]) -> Vec<BrokerId> {
    replicas
        .iter()
        .filter(|r| !image.is_alive(**r))
        .copied()
        .map(BrokerId)
        .collect()
}

fn topic_entry(t: &TopicView, image: &ClusterView) -> MetadataResponseTopic {
    let mut out = MetadataResponseTopic::default();
    out.name = Some(TopicName(strb(t.name.clone())));
    out.topic_id = t.id;
    out.is_internal = t.is_internal();
    out.topic_authorized_operations = i32::MIN;
    out.partitions = t
        .partitions
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let mut mp = MetadataResponsePartition::default();
            mp.partition_index = i as i32;
            mp.leader_id = BrokerId(p.leader);
            mp.leader_epoch = p.leader_epoch;
            mp.replica_nodes = p.replicas.iter().copied().map(BrokerId).collect();
            mp.isr_nodes = p.isr.iter().copied().map(BrokerId).collect();
            // Replicas on brokers that are down (Metadata v5+).
            mp.offline_replicas = offline_replicas(image, &p.replicas);
            if p.leader < 0 {
                mp.error_code = ResponseError::LeaderNotAvailable.code();
            }
            mp
        })
        .collect();
    out
}
