//! ListOffsets: earliest (-2), latest (-1), max timestamp (-3), earliest
//! local (-4) and by timestamp.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
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
/// `replica_id` of a consumer's (any client's) request.
pub const CONSUMER_REPLICA_ID: i32 = -1;

pub fn handle(broker: &Arc<Broker>, req: ListOffsetsRequest, version: i16) -> ListOffsetsResponse {
    let mut resp = ListOffsetsResponse::default();
    let authz = Authz::current(broker);
    // A consumer's request (a follower or a debugging tool sees the leader's
    // raw state).
    let client = req.replica_id.0 == CONSUMER_REPLICA_ID;
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
                lookup(
                    &part,
                    p.timestamp,
                    client,
                    version,
                    req.isolation_level == 1,
                )
                .map(|r| (r, part.leader_epoch()))
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
/// has a timestamp at or after it. A client is only ever shown committed
/// offsets (below the high watermark); while a new leader's high watermark
/// lags the start of its epoch it is told `OFFSET_NOT_AVAILABLE` (from v5;
/// `LEADER_NOT_AVAILABLE` before, both retriable) for the latest offset and
/// for any lookup that lands at or beyond it, as Kafka does.
fn lookup(
    part: &Partition,
    timestamp: i64,
    client: bool,
    version: i16,
    read_committed: bool,
) -> Result<Option<(i64, i64)>, ApiError> {
    // A read_committed client sees up to the last stable offset.
    let hw = if read_committed {
        part.last_stable_offset()
    } else {
        part.high_watermark()
    };
    let lagging = || {
        if client && part.high_watermark_lagging() {
            let code = if version >= 5 {
                ResponseError::OffsetNotAvailable
            } else {
                ResponseError::LeaderNotAvailable
            };
            Err(ApiError::new(
                code,
                format!("the new leader's high watermark ({hw}) is behind the start of its epoch"),
            ))
        } else {
            Ok(None)
        }
    };
    let found = match timestamp {
        LATEST | LATEST_TIERED => return lagging().map(|_| Some((hw, -1))),
        EARLIEST | EARLIEST_LOCAL => return Ok(Some((part.log_start_offset(), -1))),
        MAX_TIMESTAMP => part
            .with_log(|l| l.max_timestamp_and_offset())?
            .map(|(ts, off)| (off, ts)),
        ts => part.with_log(|l| l.offset_for_timestamp(ts))?,
    };
    match found {
        Some((offset, ts)) if !client || offset < hw => Ok(Some((offset, ts))),
        _ => lagging(),
    }
}
