//! DescribeTopicPartitions (KIP-966): what Kafka 4's admin client and
//! `kafka-topics --describe` ask instead of Metadata. Like Metadata it names
//! each partition's leader, replicas and ISR, and adds the eligible leader
//! replicas and the replicas on brokers that are down; the answer is paged
//! by partitions (`response_partition_limit`, a cursor to go on from).

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_topic_partitions_response::{
    Cursor, DescribeTopicPartitionsResponsePartition, DescribeTopicPartitionsResponseTopic,
};
use kafka_protocol::messages::{
    BrokerId, DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse, TopicName,
};
use skein_controller::acls::{AclOperation, ResourceType};
use skein_controller::view::ClusterView;
use uuid::Uuid;

use super::strb;
use crate::authorizer::Authz;
use crate::broker::Broker;
use crate::metadata::TopicView;

/// Kafka's `max.request.partition.size.limit` default: the most partitions
/// one answer carries, whatever the request asks.
pub const MAX_PARTITIONS_PER_RESPONSE: i32 = 2000;

pub fn handle(
    broker: &Arc<Broker>,
    req: DescribeTopicPartitionsRequest,
) -> DescribeTopicPartitionsResponse {
    let image = broker.metadata.image();
    let authz = Authz::current(broker);
    let (cursor_topic, cursor_partition) = req.cursor.as_ref().map_or((String::new(), 0), |c| {
        (c.topic_name.0.to_string(), c.partition_index.max(0))
    });
    let all = req.topics.is_empty();
    let mut names: Vec<String> = if all {
        image.topics.keys().cloned().collect()
    } else {
        req.topics.iter().map(|t| t.name.0.to_string()).collect()
    };
    names.sort();
    names.dedup();
    names.retain(|n| *n >= cursor_topic);
    // Topics one may not describe: left out of "all topics", refused when named.
    let (allowed, denied): (Vec<String>, Vec<String>) = names
        .into_iter()
        .partition(|n| authz.topic(AclOperation::Describe, n));

    let mut resp = DescribeTopicPartitionsResponse::default();
    let mut remaining = req
        .response_partition_limit
        .clamp(1, MAX_PARTITIONS_PER_RESPONSE) as usize;
    let mut queue = allowed.into_iter().peekable();
    while remaining > 0 {
        let Some(name) = queue.next() else { break };
        let Some(t) = image.topics.get(&name) else {
            if !all {
                resp.topics
                    .push(error_topic(&name, ResponseError::UnknownTopicOrPartition));
            }
            continue;
        };
        let first = if name == cursor_topic {
            cursor_partition as usize
        } else {
            0
        };
        let mut out = topic_entry(t);
        out.topic_authorized_operations = authz.authorized_operations(ResourceType::Topic, &name);
        let total = t.partitions.len();
        let end = total.min(first.saturating_add(remaining));
        out.partitions = (first..end)
            .map(|i| partition_entry(&image, i, &t.partitions[i]))
            .collect();
        remaining -= end.saturating_sub(first);
        resp.topics.push(out);
        if end < total {
            resp.next_cursor = Some(cursor(&name, end as i32));
            break;
        }
    }
    if resp.next_cursor.is_none() && remaining == 0 {
        if let Some(next) = queue.peek() {
            resp.next_cursor = Some(cursor(next, 0));
        }
    }
    if !all {
        for name in denied {
            resp.topics
                .push(error_topic(&name, ResponseError::TopicAuthorizationFailed));
        }
    }
    resp
}

fn cursor(topic: &str, partition: i32) -> Cursor {
    let mut c = Cursor::default();
    c.topic_name = TopicName(strb(topic.to_string()));
    c.partition_index = partition;
    c
}

fn error_topic(name: &str, code: ResponseError) -> DescribeTopicPartitionsResponseTopic {
    let mut t = DescribeTopicPartitionsResponseTopic::default();
    t.error_code = code.code();
    t.name = Some(TopicName(strb(name.to_string())));
    t.topic_id = Uuid::nil();
    t.is_internal = name.starts_with("__");
    t.topic_authorized_operations = i32::MIN;
    t
}

fn topic_entry(t: &TopicView) -> DescribeTopicPartitionsResponseTopic {
    let mut out = DescribeTopicPartitionsResponseTopic::default();
    out.name = Some(TopicName(strb(t.name.clone())));
    out.topic_id = t.id;
    out.is_internal = t.is_internal();
    out
}

fn partition_entry(
    image: &ClusterView,
    index: usize,
    p: &skein_controller::view::PartitionView,
) -> DescribeTopicPartitionsResponsePartition {
    let ids = |v: &[i32]| v.iter().copied().map(BrokerId).collect::<Vec<_>>();
    let mut out = DescribeTopicPartitionsResponsePartition::default();
    out.partition_index = index as i32;
    out.leader_epoch = p.leader_epoch;
    out.replica_nodes = ids(&p.replicas);
    out.isr_nodes = ids(&p.isr);
    out.eligible_leader_replicas = Some(ids(&p.elr));
    out.last_known_elr = Some(ids(&p.last_known_elr));
    out.offline_replicas = super::metadata::offline_replicas(image, &p.replicas);
    if image.is_alive(p.leader) {
        out.leader_id = BrokerId(p.leader);
    } else {
        out.leader_id = BrokerId(-1);
        out.error_code = ResponseError::LeaderNotAvailable.code();
    }
    out
}
