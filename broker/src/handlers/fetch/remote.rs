//! KIP-405 in a consumer's Fetch: the partitions whose fetch offset lies
//! below the local log start are read from remote storage.

use kafka_protocol::error::ResponseError;

use super::{PartResult, Wanted};
use crate::broker::Broker;
use crate::error::ApiError;

/// KIP-405: a consumer's partitions whose fetch offset is only in remote
/// storage are read from there (each waiting at most
/// `remote.fetch.max.wait.ms`; one not ready yet answers empty, with no
/// error, as Kafka's `DelayedRemoteFetch` does). Without tiered storage
/// such an offset is out of range. Returns the bytes read.
pub(super) async fn remote_reads(
    broker: &Broker,
    wanted: &[Wanted],
    results: &mut [PartResult],
    read_committed: bool,
) -> usize {
    let mut total = 0;
    for (w, r) in wanted.iter().zip(results.iter_mut()) {
        let Some(e) = &r.error else { continue };
        if e.code != ResponseError::OffsetMovedToTieredStorage {
            continue;
        }
        let (Ok(p), Some(remote)) = (&w.part, &broker.remote) else {
            r.error = Some(ApiError::new(
                ResponseError::OffsetOutOfRange,
                e.message.clone(),
            ));
            continue;
        };
        let max_bytes = w.max_bytes.max(0) as usize;
        match remote
            .read(p, w.fetch_offset, max_bytes, read_committed)
            .await
        {
            Ok(Some((records, aborted))) => {
                total += records.len();
                r.error = None;
                r.records = records;
                r.aborted = aborted;
            }
            Ok(None) => {
                r.error = None;
                if read_committed {
                    r.aborted = Some(Vec::new());
                }
            }
            Err(e) => r.error = Some(e),
        }
    }
    total
}
