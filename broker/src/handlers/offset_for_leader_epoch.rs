//! OffsetForLeaderEpoch (KIP-101, KIP-279): where a leader epoch ends in the
//! leader's log, so a follower or a consumer that saw an older leader can
//! find and drop a divergent tail.

use std::sync::Arc;

use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::{OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse};

use skein_controller::acls::AclOperation;

use crate::authorizer::{topic_denied, Authz};
use crate::broker::Broker;

pub fn handle(
    broker: &Arc<Broker>,
    req: OffsetForLeaderEpochRequest,
) -> OffsetForLeaderEpochResponse {
    let mut resp = OffsetForLeaderEpochResponse::default();
    // Followers may ask for any topic (ClusterAction); clients need
    // Describe on the topic.
    let authz = Authz::current(broker);
    let replica = authz.cluster(AclOperation::ClusterAction);
    for t in req.topics {
        let denied = !replica && !authz.topic(AclOperation::Describe, &t.topic.0);
        let mut tr = OffsetForLeaderTopicResult::default();
        tr.topic = t.topic.clone();
        for p in t.partitions {
            let mut out = EpochEndOffset::default();
            out.partition = p.partition;
            out.leader_epoch = -1;
            out.end_offset = -1;
            let result = if denied {
                Err(topic_denied())
            } else {
                broker.replicas.get_or_err(&t.topic.0, p.partition)
            }
            .and_then(|part| {
                part.check_leader(p.current_leader_epoch)?;
                Ok(part.with_log(|l| l.end_offset_for_epoch(p.leader_epoch)))
            });
            match result {
                Ok(Some((epoch, end))) => {
                    out.leader_epoch = epoch;
                    out.end_offset = end;
                }
                Ok(None) => {}
                Err(e) => out.error_code = e.code(),
            }
            tr.partitions.push(out);
        }
        resp.topics.push(tr);
    }
    resp
}
