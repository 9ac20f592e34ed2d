//! ElectLeaders (KIP-460, `kafka-leader-election`): move leadership back to
//! the preferred replica, or give an offline partition a leader from outside
//! its ISR and eligible leader replicas (unclean: records may be lost). The
//! controller decides; this handler asks it once per partition.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::elect_leaders_response::{PartitionResult, ReplicaElectionResult};
use kafka_protocol::messages::{ElectLeadersRequest, ElectLeadersResponse, TopicName};

use skein_controller::acls::AclOperation;

use super::strb;
use crate::authorizer::{cluster_denied, Authz};
use crate::broker::Broker;

/// Kafka's `ElectionType` codes.
const PREFERRED: i8 = 0;
const UNCLEAN: i8 = 1;

pub fn handle(broker: &Arc<Broker>, req: ElectLeadersRequest) -> ElectLeadersResponse {
    let image = broker.metadata.image();
    // No list means every partition; then partitions that need no election
    // are left out of the answer, as Kafka does.
    let all = req.topic_partitions.is_none();
    let wanted: Vec<(TopicName, Vec<i32>)> = match req.topic_partitions {
        Some(list) => list.into_iter().map(|t| (t.topic, t.partitions)).collect(),
        None => image
            .topics
            .values()
            .map(|t| {
                (
                    TopicName(strb(t.name.clone())),
                    (0..t.partitions.len() as i32).collect(),
                )
            })
            .collect(),
    };
    let mut resp = ElectLeadersResponse::default();
    // Alter on the cluster: refused, the request and each partition say so.
    let denied = !Authz::current(broker).cluster(AclOperation::Alter);
    if denied {
        resp.error_code = ResponseError::ClusterAuthorizationFailed.code();
    }
    for (topic, partitions) in wanted {
        let mut result = ReplicaElectionResult::default();
        result.topic = topic.clone();
        for partition in partitions {
            let outcome = match req.election_type {
                _ if denied => Err(cluster_denied()),
                PREFERRED | UNCLEAN => broker
                    .metadata
                    .elect_leader(&topic.0, partition, req.election_type == UNCLEAN)
                    .map(|_| ()),
                other => Err(crate::error::ApiError::new(
                    ResponseError::InvalidRequest,
                    format!("unknown election type {other}"),
                )),
            };
            let mut p = PartitionResult::default();
            p.partition_id = partition;
            match outcome {
                Ok(()) => {}
                Err(e) if all && e.code == ResponseError::ElectionNotNeeded => continue,
                Err(e) => {
                    p.error_code = e.code.code();
                    p.error_message = Some(strb(e.message.clone()));
                }
            }
            result.partition_result.push(p);
        }
        if !all || !result.partition_result.is_empty() {
            resp.replica_election_results.push(result);
        }
    }
    resp
}
