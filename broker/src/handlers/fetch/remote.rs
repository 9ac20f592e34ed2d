//! KIP-405 in a consumer's Fetch: the partitions whose fetch offset lies
//! below the local log start are read from remote storage.

use std::time::Instant;

use kafka_protocol::error::ResponseError;

use super::{PartResult, Wanted};
use crate::broker::Broker;
use crate::error::ApiError;

/// KIP-405: a consumer's partitions whose fetch offset is only in remote
/// storage are read from there, all at once (as Kafka 4.x's
/// `DelayedRemoteFetch` does), within one `remote.fetch.max.wait.ms` for
/// the whole fetch: a partition not read by then answers empty, with no
/// error (its download goes on). The reads share the broker's
/// `remote.log.reader.threads` slots with every other fetch, and the
/// response's `max_bytes` (what the local reads left of it): in partition
/// order, a read that would pass it is answered empty, unless nothing is in
/// the response yet (KIP-74: at least one batch). Without tiered storage such an offset is
/// out of range. Returns the bytes read.
pub(super) async fn remote_reads(
    broker: &Broker,
    wanted: &[Wanted],
    results: &mut [PartResult],
    read_committed: bool,
    budget: usize,
    first_in_response: bool,
) -> usize {
    let remote_at: Vec<usize> = results
        .iter()
        .enumerate()
        .filter(|(_, r)| {
            r.error
                .as_ref()
                .is_some_and(|e| e.code == ResponseError::OffsetMovedToTieredStorage)
        })
        .map(|(i, _)| i)
        .collect();
    if remote_at.is_empty() {
        return 0;
    }
    let Some(remote) = &broker.remote else {
        for i in remote_at {
            let e = results[i].error.take().expect("an error");
            results[i].error = Some(ApiError::new(ResponseError::OffsetOutOfRange, e.message));
        }
        return 0;
    };
    // Nothing is read when the local reads filled the response.
    let room = budget > 0 || first_in_response;
    let deadline = tokio::time::Instant::from_std(Instant::now() + remote.fetch_max_wait());
    let mut reads = Vec::with_capacity(remote_at.len());
    for &i in &remote_at {
        let w = &wanted[i];
        let Ok(p) = &w.part else { continue };
        let max_bytes = (w.max_bytes.max(0) as usize).min(budget);
        let read = room.then(|| remote.read(p, w.fetch_offset, max_bytes, read_committed));
        // Past the fetch's wait: answered empty, as Kafka's expired
        // DelayedRemoteFetch.
        reads.push(async move {
            let Some(read) = read else {
                return (i, Ok(None));
            };
            (
                i,
                tokio::time::timeout_at(deadline, read)
                    .await
                    .unwrap_or(Ok(None)),
            )
        });
    }
    let done = futures::future::join_all(reads).await;
    let (mut total, mut left, mut first) = (0, budget, first_in_response);
    for (i, read) in done {
        let r = &mut results[i];
        r.error = None;
        match read {
            Ok(Some((records, aborted))) if first || records.len() <= left => {
                first = false;
                total += records.len();
                left = left.saturating_sub(records.len());
                r.records = records;
                r.aborted = aborted;
            }
            // Not ready within the wait, or no room in the response.
            Ok(_) => {
                if read_committed {
                    r.aborted = Some(Vec::new());
                }
            }
            Err(e) => r.error = Some(e),
        }
    }
    total
}
