//! ListOffsets: earliest (-2), latest (-1), max timestamp (-3), earliest
//! local (-4) and by timestamp.

use std::sync::Arc;

use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};

use skein_controller::acls::AclOperation;

use crate::authorizer::{topic_denied, Authz};
use crate::broker::Broker;
use crate::error::ApiError;
use crate::partition::Partition;

pub const LATEST: i64 = -1;
pub const EARLIEST: i64 = -2;
pub const MAX_TIMESTAMP: i64 = -3;
pub const EARLIEST_LOCAL: i64 = -4;
pub const LATEST_TIERED: i64 = -5;

pub fn handle(broker: &Arc<Broker>, req: ListOffsetsRequest, version: i16) -> ListOffsetsResponse {
    let mut resp = ListOffsetsResponse::default();
    let authz = Authz::current(broker);
    for t in req.topics {
        let mut tr = ListOffsetsTopicResponse::default();
        tr.name = t.name.clone();
        // Describe on the topic, before existence.
        let denied = !authz.topic(AclOperation::Describe, &t.name.0);
        for p in t.partitions {
            let mut pr = ListOffsetsPartitionResponse::default();
            pr.partition_index = p.partition_index;
            pr.timestamp = -1;
            pr.offset = -1;
            pr.leader_epoch = -1;
            let result = if denied {
                Err(topic_denied())
            } else {
                broker.replicas.get_or_err(&t.name.0, p.partition_index)
            }
            .and_then(|part| {
                // Only the leader answers, and only for the epoch the
                // client believes in (KIP-320); -1 skips the check.
                let epoch = if version >= 4 {
                    p.current_leader_epoch
                } else {
                    -1
                };
                part.check_leader(epoch)?;
                lookup(&part, p.timestamp).map(|r| (r, part.leader_epoch()))
            });
            match result {
                Ok((Some((offset, ts)), epoch)) => {
                    pr.offset = offset;
                    pr.timestamp = ts;
                    // The leader epoch field exists from v4; older versions must leave it at -1.
                    if version >= 4 {
                        pr.leader_epoch = epoch;
                    }
                }
                Ok((None, _)) => {}
                Err(e) => pr.error_code = e.code(),
            }
            tr.partitions.push(pr);
        }
        resp.topics.push(tr);
    }
    resp
}

/// `(offset, timestamp)` answering `timestamp`, or `None` when no record
/// has a timestamp at or after it.
fn lookup(part: &Partition, timestamp: i64) -> Result<Option<(i64, i64)>, ApiError> {
    match timestamp {
        LATEST | LATEST_TIERED => Ok(Some((part.high_watermark(), -1))),
        EARLIEST | EARLIEST_LOCAL => Ok(Some((part.log_start_offset(), -1))),
        MAX_TIMESTAMP => Ok(part
            .with_log(|l| l.max_timestamp_and_offset())?
            .map(|(ts, off)| (off, ts))),
        ts => Ok(part.with_log(|l| l.offset_for_timestamp(ts))?),
    }
}
