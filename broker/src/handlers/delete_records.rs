//! DeleteRecords: the leader moves the log start offset and answers once
//! the replicas have followed (the low watermark).

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::{DeleteRecordsRequest, DeleteRecordsResponse};
use skein_controller::acls::AclOperation;

use crate::authorizer::{topic_denied, Authz};
use crate::broker::Broker;
use crate::error::ApiError;

/// DeleteRecords as Kafka's: only the partition's leader moves its log
/// start offset (`NOT_LEADER_OR_FOLLOWER` elsewhere); the followers follow
/// through their fetches (every fetch response carries the leader's log
/// start offset), and the answer waits, up to the request's timeout, for the
/// low watermark — the smallest log start offset among the replicas on live
/// brokers — to reach the requested offset (`REQUEST_TIMED_OUT` otherwise).
/// So records deleted and acknowledged do not come back after a failover.
pub async fn handle(broker: &Arc<Broker>, req: DeleteRecordsRequest) -> DeleteRecordsResponse {
    let mut resp = DeleteRecordsResponse::default();
    let authz = Authz::current(broker);
    let deadline = tokio::time::Instant::now()
        + std::time::Duration::from_millis(req.timeout_ms.max(0) as u64);
    let mut waiting = Vec::new();
    for t in req.topics {
        let mut tr = DeleteRecordsTopicResult::default();
        tr.name = t.name.clone();
        let denied = !authz.topic(AclOperation::Delete, &t.name.0);
        for p in t.partitions {
            let mut pr = DeleteRecordsPartitionResult::default();
            pr.partition_index = p.partition_index;
            pr.low_watermark = -1;
            let res = if denied {
                Err(topic_denied())
            } else if crate::internal_topics::is_internal(&t.name.0)
                && broker.metadata.topic(&t.name.0).is_some()
            {
                // The coordinators' state is theirs alone (Kafka's
                // ReplicaManager refuses it the same way).
                Err(crate::internal_topics::refused_write(
                    &t.name.0,
                    "delete records of",
                ))
            } else {
                broker.replicas.get_or_err(&t.name.0, p.partition_index)
            }
            .and_then(|part| Ok((part.delete_records_on_leader(p.offset)?, part)));
            match res {
                Ok((target, part)) => {
                    waiting.push((resp.topics.len(), tr.partitions.len(), part, target))
                }
                Err(e) => pr.error_code = e.code(),
            }
            tr.partitions.push(pr);
        }
        resp.topics.push(tr);
    }
    for (ti, pi, part, target) in waiting {
        let pr = &mut resp.topics[ti].partitions[pi];
        match wait_low_watermark(broker, &part, target, deadline).await {
            Ok(low) => pr.low_watermark = low,
            Err(e) => pr.error_code = e.code(),
        }
    }
    resp
}

/// Waits until the partition's low watermark reaches `target`.
async fn wait_low_watermark(
    broker: &Broker,
    part: &crate::partition::Partition,
    target: i64,
    deadline: tokio::time::Instant,
) -> Result<i64, ApiError> {
    loop {
        let changed = part.changed();
        tokio::pin!(changed);
        changed.as_mut().enable();
        let image = broker.metadata.image();
        let low = part.low_watermark(|id| image.is_alive(id))?;
        if low >= target {
            return Ok(low);
        }
        if tokio::time::timeout_at(deadline, changed).await.is_err() {
            return Err(ApiError::new(
                ResponseError::RequestTimedOut,
                format!(
                    "{}-{}: the replicas did not reach log start offset {target} within the timeout (low watermark {low})",
                    part.topic, part.index
                ),
            ));
        }
    }
}
