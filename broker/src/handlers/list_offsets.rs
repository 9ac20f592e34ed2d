//! ListOffsets: earliest (-2), latest (-1), max timestamp (-3), earliest
//! local (-4), latest tiered (-5), earliest pending upload (-6, KIP-1023)
//! and by timestamp, each special timestamp
//! from the version Kafka introduced it in (older versions, and unknown
//! negative timestamps, get `UNSUPPORTED_VERSION`). Without tiered storage
//! -4 answers as -2 and -5 and -6 answer offset -1, as Kafka without
//! `remote.log.storage.system.enable`. The leader epoch answered is the one
//! that wrote the offset (the current one for -1), as Kafka's.

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
pub const EARLIEST_PENDING_UPLOAD: i64 = -6;
/// `replica_id` of a consumer's (any client's) request.
pub const CONSUMER_REPLICA_ID: i32 = -1;

pub async fn handle(
    broker: &Arc<Broker>,
    req: ListOffsetsRequest,
    version: i16,
) -> ListOffsetsResponse {
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
            let part = if denied {
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
                supported(p.timestamp, version)?;
                Ok(part)
            });
            // A timestamp lookup of a tiered log searches remote storage
            // first (Kafka's `RemoteLogOffsetReader`), then the local log.
            let remote_hit = match (&part, &broker.remote) {
                (Ok(part), Some(remote))
                    if p.timestamp >= 0 && part.with_log(|l| l.config().remote_storage_enable) =>
                {
                    remote.offset_for_timestamp(part, p.timestamp).await
                }
                _ => Ok(None),
            };
            let result = part.and_then(|part| match remote_hit? {
                Some((offset, timestamp)) => Ok(Some(Found {
                    offset,
                    timestamp,
                    epoch: part.with_log(|l| l.epoch_for_offset(offset)),
                })),
                None => lookup(
                    &part,
                    p.timestamp,
                    client,
                    version,
                    req.isolation_level == 1,
                ),
            });
            match result {
                Ok(Some(found)) => {
                    pr.offset = found.offset;
                    pr.timestamp = found.timestamp;
                    // The leader epoch field exists from v4; older versions must leave it at -1.
                    if version >= 4 {
                        pr.leader_epoch = found.epoch.unwrap_or(-1);
                    }
                }
                Ok(None) => {}
                Err(e) => pr.error_code = e.code(),
            }
            tr.partitions.push(pr);
        }
        resp.topics.push(tr);
    }
    resp
}

/// What a partition answers.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Found {
    offset: i64,
    timestamp: i64,
    /// The epoch that wrote `offset` (`None`: unknown, -1 on the wire).
    epoch: Option<i32>,
}

/// Whether `version` knows special timestamp `timestamp` (Kafka's
/// `ReplicaManager.isListOffsetsTimestampUnsupported`): -3 from v7, -4
/// from v8, -5 from v9, -6 from v11; any other negative one never.
fn supported(timestamp: i64, version: i16) -> Result<(), ApiError> {
    let since = match timestamp {
        t if t >= 0 => return Ok(()),
        LATEST | EARLIEST => 0,
        MAX_TIMESTAMP => 7,
        EARLIEST_LOCAL => 8,
        LATEST_TIERED => 9,
        EARLIEST_PENDING_UPLOAD => 11,
        _ => i16::MAX,
    };
    if version >= since {
        Ok(())
    } else {
        Err(ApiError::new(
            ResponseError::UnsupportedVersion,
            format!("ListOffsets v{version} does not support timestamp {timestamp}"),
        ))
    }
}

/// The answer to `timestamp`, or `None` when no record has a timestamp at
/// or after it. A client is only ever shown committed
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
) -> Result<Option<Found>, ApiError> {
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
        LATEST => {
            return lagging().map(|_| {
                Some(Found {
                    offset: hw,
                    timestamp: -1,
                    epoch: Some(part.leader_epoch()),
                })
            })
        }
        // The last offset copied to remote storage; without tiering -1,
        // as Kafka answers.
        LATEST_TIERED => {
            return Ok(Some(part.with_log(|l| {
                let offset = match l.config().remote_storage_enable {
                    true => l.highest_offset_in_remote(),
                    false => -1,
                };
                Found {
                    offset,
                    timestamp: -1,
                    epoch: (offset >= 0).then(|| l.epoch_for_offset(offset)).flatten(),
                }
            })))
        }
        // The first offset not yet copied to remote storage, as Kafka's
        // `UnifiedLog.fetchEarliestPendingUploadOffset`: past the last
        // copied one (never below the log start); with nothing copied, the
        // log start while the local log still begins there, else unknown
        // (-1). Without tiering -1.
        EARLIEST_PENDING_UPLOAD => {
            return Ok(part.with_log(|l| {
                let (start, local_start) = (l.log_start_offset(), l.local_log_start_offset());
                let offset = match (
                    l.config().remote_storage_enable,
                    l.highest_offset_in_remote(),
                ) {
                    (false, _) => -1,
                    (true, -1) if local_start == start => start,
                    (true, -1) => -1,
                    (true, highest) => (highest + 1).max(start),
                };
                let epoch = match offset {
                    -1 => None,
                    o if o == start => l.epoch_at_log_start(),
                    o => l.epoch_for_offset(o),
                };
                Some(Found {
                    offset,
                    timestamp: -1,
                    epoch,
                })
            }));
        }
        // A tiered log's first local offset.
        EARLIEST_LOCAL if part.with_log(|l| l.config().remote_storage_enable) => {
            return Ok(part.with_log(|l| {
                let offset = l.local_log_start_offset();
                Some(Found {
                    offset,
                    timestamp: -1,
                    epoch: l.epoch_for_offset(offset),
                })
            }));
        }
        // Otherwise the earliest local offset is the earliest one.
        EARLIEST | EARLIEST_LOCAL => {
            return Ok(part.with_log(|l| {
                Some(Found {
                    offset: l.log_start_offset(),
                    timestamp: -1,
                    epoch: l.epoch_at_log_start(),
                })
            }));
        }
        ts => part.with_log(|l| {
            let hit = if ts == MAX_TIMESTAMP {
                l.max_timestamp_and_offset()?
                    .map(|(ts, offset)| (offset, ts))
            } else {
                l.offset_for_timestamp(ts)?
            };
            Ok::<_, skein_storage::StorageError>(hit.map(|(offset, timestamp)| Found {
                offset,
                timestamp,
                epoch: l.epoch_for_offset(offset),
            }))
        })?,
    };
    match found {
        Some(f) if !client || f.offset < hw => Ok(Some(f)),
        _ => lagging(),
    }
}
