//! ElectLeaders (KIP-460, `kafka-leader-election`): move leadership back to
//! the preferred replica, or give an offline partition a leader from outside
//! its ISR and eligible leader replicas (unclean: records may be lost). The
//! controller decides: this handler asks it for up to [`BATCH`] partitions
//! per request, each batch committed as one (a whole-cluster preferred
//! election is a handful of round trips, not one per partition).

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::elect_leaders_response::{PartitionResult, ReplicaElectionResult};
use kafka_protocol::messages::{ElectLeadersRequest, ElectLeadersResponse, TopicName};

use skein_controller::acls::AclOperation;

use super::strb;
use crate::authorizer::{cluster_denied, Authz};
use crate::broker::Broker;
use crate::error::ApiError;

/// Partitions per controller request.
const BATCH: usize = 5_000;

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
    // Every partition's outcome, in the request's order: refused here, or
    // asked of the controller in batches below.
    let mut outcomes: Vec<Vec<Option<Result<(), ApiError>>>> = Vec::new();
    let mut asked: Vec<(String, u32)> = Vec::new();
    let mut slots: Vec<(usize, usize)> = Vec::new();
    for (t, (topic, partitions)) in wanted.iter().enumerate() {
        let mut row = Vec::with_capacity(partitions.len());
        for (i, &partition) in partitions.iter().enumerate() {
            row.push(match req.election_type {
                _ if denied => Some(Err(cluster_denied())),
                PREFERRED | UNCLEAN if partition >= 0 => {
                    asked.push((topic.0.to_string(), partition as u32));
                    slots.push((t, i));
                    None
                }
                PREFERRED | UNCLEAN => Some(Err(ApiError::new(
                    ResponseError::UnknownTopicOrPartition,
                    format!("no partition {partition}"),
                ))),
                other => Some(Err(ApiError::new(
                    ResponseError::InvalidRequest,
                    format!("unknown election type {other}"),
                ))),
            });
        }
        outcomes.push(row);
    }
    let unclean = req.election_type == UNCLEAN;
    for (chunk, chunk_slots) in asked.chunks(BATCH).zip(slots.chunks(BATCH)) {
        let results = match broker.metadata.elect_leaders(chunk, unclean) {
            Ok(results) => results.into_iter().map(|r| r.map(|_| ())).collect(),
            Err(e) => vec![Err(e); chunk.len()],
        };
        for (&(t, i), result) in chunk_slots.iter().zip(results) {
            outcomes[t][i] = Some(result);
        }
    }
    for ((topic, partitions), row) in wanted.into_iter().zip(outcomes) {
        let mut result = ReplicaElectionResult::default();
        result.topic = topic;
        for (partition, outcome) in partitions.into_iter().zip(row) {
            let mut p = PartitionResult::default();
            p.partition_id = partition;
            match outcome.expect("every partition has an outcome") {
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
