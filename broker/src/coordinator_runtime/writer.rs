//! A coordinator's writes (Kafka's `PartitionWriter`): one record batch
//! appended to a partition of its topic through the broker's one write
//! path, with the coordinator origin.

use std::time::Duration;

use bytes::BytesMut;
use skein_storage::AppendOrigin;

use super::CoordinatorContext;
use crate::append::{AppendRecords, Appended, Records, RequiredAcks};
use crate::error::ApiError;

/// Appends `batch` to `topic`-`partition`; its offsets are known at once
/// and the returned [`Appended`] resolves when `acks` are met (or
/// `timeout` passes).
pub fn write(
    ctx: &CoordinatorContext,
    topic: &str,
    partition: i32,
    batch: BytesMut,
    acks: RequiredAcks,
    timeout: Duration,
) -> Result<Appended, ApiError> {
    ctx.replicas.append_records(AppendRecords {
        topic,
        partition,
        records: Records::Built(batch),
        origin: AppendOrigin::Coordinator,
        acks,
        timeout,
    })
}
